package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// emit prints v: as JSON with --json, else as the table that table writes.
func (a *app) emit(v any, table func(t *tableWriter)) error {
	if a.asJSON {
		return writeJSON(a.stdout, v)
	}
	t := &tableWriter{w: tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)}
	table(t)
	return t.w.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// tableWriter writes aligned columns for people.
type tableWriter struct{ w *tabwriter.Writer }

// row writes one row; cells are made one line, so that a value with a tab
// or newline in it cannot break the table.
func (t *tableWriter) row(cells ...string) {
	for i, c := range cells {
		cells[i] = oneLine(c)
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

// line writes text outside the columns (a heading, a note).
func (t *tableWriter) line(format string, args ...any) {
	fmt.Fprintf(t.w, format+"\n", args...)
}

func oneLine(s string) string {
	if !strings.ContainsAny(s, "\t\n\r") {
		return s
	}
	return strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
}

// when formats a time for a table: UTC to the second; "-" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// position formats a position for a table: "-" for the start.
func position(p eventstore.Position) string {
	if p.IsZero() {
		return "-"
	}
	return p.String()
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
