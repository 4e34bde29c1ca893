package main

import (
	"testing"

	"github.com/cairn-es/cairn/internal/testrig/doccheck"
)

// The Go blocks of docs/observability.md are pieces of the example.
func TestObservabilityDocSnippets(t *testing.T) {
	doccheck.Snippets(t, "../../docs/observability.md", 3, "tracing.go", "service.go")
}
