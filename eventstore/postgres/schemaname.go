package postgres

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cairn-es/cairn/eventstore"
)

// maxSchemaName is the longest schema name in bytes. PostgreSQL cuts
// identifiers at 63 bytes; the notification channel adds a prefix to the
// schema name, and two schemas must not share one.
const maxSchemaName = 40

// checkSchemaName refuses, before anything reaches the server, a schema
// name that PostgreSQL would reject with a raw SQLSTATE (a NUL byte, invalid
// UTF-8, the reserved pg_ prefix), that it would silently cut (too long), or
// that would put the store among the system's own tables
// (information_schema). Control characters and spaces at either end are
// refused too: they are legal in a quoted identifier, but never meant, and
// they make the name unreadable in logs and psql. Anything else is allowed:
// the name is always quoted.
func checkSchemaName(name string) error {
	bad := func(format string, args ...any) error {
		return &eventstore.InvalidArgumentError{Index: -1, Field: "schema name",
			Reason: fmt.Sprintf("%q ", name) + fmt.Sprintf(format, args...)}
	}
	switch {
	case len(name) > maxSchemaName:
		return bad("is %d bytes long, more than the limit of %d", len(name), maxSchemaName)
	case !utf8.ValidString(name):
		return bad("is not valid UTF-8")
	case strings.ContainsFunc(name, unicode.IsControl):
		return bad("contains a control character (NUL, newline, tab, ...)")
	case strings.TrimSpace(name) != name:
		return bad("starts or ends with white space")
	case strings.HasPrefix(name, "pg_"):
		return bad("starts with pg_, which PostgreSQL reserves for system schemas")
	case name == "information_schema":
		return bad("is PostgreSQL's own schema")
	}
	return nil
}
