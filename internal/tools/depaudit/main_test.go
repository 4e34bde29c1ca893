package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuditRefusesAVersionBelowItsMinimum(t *testing.T) {
	mins, err := parseMinimums(strings.NewReader(`
# a comment
example.com/a  v1.9.2  ADV-1 (fixed in v1.9.2)
example.com/b  v0.3.0  ADV-2
example.com/c  v2.0.0  ADV-3
`))
	require.NoError(t, err)
	mods, err := parseModules(strings.NewReader(`{"Path":"example.com/self","Main":true}
{"Path":"example.com/a","Version":"v1.9.1"}
{"Path":"example.com/b","Version":"v0.2.0","Replace":{"Path":"example.com/b","Version":"v0.3.1"}}
`))
	require.NoError(t, err)
	problems := audit(mins, build{Dir: ".", Modules: mods})
	require.Len(t, problems, 2)
	assert.Contains(t, problems[0], "example.com/a is at v1.9.1, below v1.9.2: ADV-1")
	assert.Contains(t, problems[1], "example.com/c, which the build no longer uses")
}

// A pin holds in every module of the repository that uses the pinned
// module, and is stale only when none does.
func TestAuditChecksEveryModule(t *testing.T) {
	mins, err := parseMinimums(strings.NewReader("example.com/net v0.33.0 ADV-4\nexample.com/pgx v5.9.2 ADV-5\n"))
	require.NoError(t, err)
	main, err := parseModules(strings.NewReader(`{"Path":"example.com/self","Main":true}
{"Path":"example.com/pgx","Version":"v5.9.2"}
`))
	require.NoError(t, err)
	store, err := parseModules(strings.NewReader(`{"Path":"example.com/self/store","Main":true}
{"Path":"example.com/pgx","Version":"v5.9.2"}
{"Path":"example.com/net","Version":"v0.30.0"}
`))
	require.NoError(t, err)
	problems := audit(mins, build{Dir: ".", Modules: main}, build{Dir: "store", Modules: store})
	require.Len(t, problems, 1, "the pin of a module only the second module uses is not stale")
	assert.Contains(t, problems[0], "example.com/net is at v0.30.0 in store, below v0.33.0: ADV-4")
}

func TestParseMinimumsNamesTheBadLine(t *testing.T) {
	_, err := parseMinimums(strings.NewReader("example.com/a v1\n\nexample.com/b 1.2.3 reason\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 1")
	_, err = parseMinimums(strings.NewReader("example.com/b 1.2.3 reason\n"))
	assert.ErrorContains(t, err, `line 1: "1.2.3" is not a semantic version`)
}

// The list that make lint checks parses.
func TestTheRepositorysMinimumsParse(t *testing.T) {
	f, err := os.Open("minimums.txt")
	require.NoError(t, err)
	defer f.Close()
	mins, err := parseMinimums(f)
	require.NoError(t, err)
	assert.NotEmpty(t, mins)
}
