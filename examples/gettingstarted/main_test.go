package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/internal/testrig/doccheck"
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
// honest: each Go block is a piece of this compiled, tested program. The
// README's sample is held to readme_test.go the same way.
func TestEverySnippetOfTheGuideIsInTheProgram(t *testing.T) {
	doccheck.Snippets(t, "../../docs/getting-started.md", 8, "main.go", "cart.go")
	doccheck.Snippets(t, "../../README.md", 2, "readme_test.go")
}
