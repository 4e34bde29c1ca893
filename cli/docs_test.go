package cli_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSONFieldsDocumented keeps docs/cli.md and the --json output in
// step: every JSON field name any command prints is listed there, so that
// a field added to a row cannot go undocumented.
func TestJSONFieldsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "cli.md"))
	require.NoError(t, err)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fields := map[string]string{} // JSON name -> where it is declared
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok || field.Tag == nil {
				return true
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			require.NoError(t, err)
			jsonName, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if jsonName != "" && jsonName != "-" {
				fields[jsonName] = fset.Position(field.Pos()).String()
			}
			return true
		})
	}
	require.NotEmpty(t, fields)
	for name, where := range fields {
		require.Contains(t, string(doc), "`"+name+"`", "the JSON field %q (%s) is not in docs/cli.md", name, where)
	}
}
