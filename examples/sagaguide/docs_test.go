package main

import (
	"testing"

	"github.com/cairn-es/cairn/internal/testrig/doccheck"
)

// TestEverySnippetOfTheGuideIsInTheProgram keeps docs/sagas.md honest:
// each Go block is a piece of this compiled, tested program.
func TestEverySnippetOfTheGuideIsInTheProgram(t *testing.T) {
	doccheck.Snippets(t, "../../docs/sagas.md", 12, "domain.go", "saga.go", "main.go", "guide_test.go")
}
