package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheGuidesServiceCountsEachCommandOnce(t *testing.T) {
	r, err := shop(context.Background(), filepath.Join(t.TempDir(), "shop.db"))
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"tea": 2, "cups": 4}, r.lines, "msg-2 was delivered twice and counted once")
	assert.Equal(t, "checked out", r.status)
	assert.True(t, r.duplicate)
	assert.ErrorIs(t, r.refused, ErrCheckedOut)
}

// TestEverySnippetOfTheGuideIsInTheProgram keeps docs/getting-started.md
// honest: each Go block is a piece of this compiled, tested program (with
// the indentation of its function body removed, for a piece of one). The
// README's sample is held to readme_test.go the same way.
func TestEverySnippetOfTheGuideIsInTheProgram(t *testing.T) {
	for _, c := range []struct {
		doc     string
		sources []string
		blocks  int
	}{
		{"../../docs/getting-started.md", []string{"main.go", "cart.go"}, 8},
		{"../../README.md", []string{"readme_test.go"}, 2},
	} {
		doc, err := os.ReadFile(c.doc)
		require.NoError(t, err)
		var program strings.Builder
		for _, name := range c.sources {
			src, err := os.ReadFile(name)
			require.NoError(t, err)
			program.Write(src)
		}
		code := program.String()
		body := undent(code)
		blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
		require.GreaterOrEqual(t, len(blocks), c.blocks, "the Go blocks of %s", c.doc)
		for _, b := range blocks {
			snippet := b[1]
			assert.True(t, strings.Contains(code, snippet) || strings.Contains(body, snippet),
				"a snippet of %s that %v does not contain:\n%s", c.doc, c.sources, snippet)
		}
	}
}

// undent removes one level of tab indentation from every line, so that a
// snippet taken from a function body matches.
func undent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	return strings.Join(lines, "\n")
}
