// Package doccheck keeps the Go blocks of the documentation honest: each
// must be a piece of a program that is compiled and tested, so that no
// snippet a reader copies can have drifted from code that works.
package doccheck

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// goBlock is a fenced Go block of a Markdown file.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// Snippets fails tb for every Go block of the Markdown file doc that is
// not a piece of the Go files sources, verbatim, or with one level of tab
// indentation removed (a piece of a function body), and when doc has
// fewer than least Go blocks (a guide whose blocks were lost, or retagged,
// would pass otherwise).
func Snippets(tb testing.TB, doc string, least int, sources ...string) {
	tb.Helper()
	text, err := os.ReadFile(doc)
	if err != nil {
		tb.Fatalf("doccheck: %v", err)
	}
	var program strings.Builder
	for _, name := range sources {
		src, err := os.ReadFile(name)
		if err != nil {
			tb.Fatalf("doccheck: %v", err)
		}
		program.Write(src)
	}
	code := program.String()
	body := undent(code)
	blocks := goBlock.FindAllStringSubmatch(string(text), -1)
	if len(blocks) < least {
		tb.Errorf("doccheck: %s has %d Go blocks, fewer than the %d expected", doc, len(blocks), least)
	}
	for _, b := range blocks {
		if snippet := b[1]; !strings.Contains(code, snippet) && !strings.Contains(body, snippet) {
			tb.Errorf("doccheck: a Go block of %s is not a piece of %v:\n%s", doc, sources, snippet)
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
