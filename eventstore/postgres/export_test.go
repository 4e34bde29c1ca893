package postgres

import "time"

// CommandResultSQL is the statement behind CommandResult, with the store's
// schema, so that a test can EXPLAIN it.
func (s *Store) CommandResultSQL() string { return s.fill(commandResultSQL) }

// CommandDerivedSQL is the statement that finds an append of the command
// bus, with the store's schema, so that a test can EXPLAIN it.
func (s *Store) CommandDerivedSQL() string { return s.fill(commandDerivedSQL) }

// ListenerPresenceSQL is the statement by which the notify worker looks
// for other stores' listeners: $1 the start of their names, $2 the name of
// the store's own.
const ListenerPresenceSQL = listenerPresenceSQL

// ListenerPrefix is how the application_name of a LISTEN connection on
// channel starts.
func ListenerPrefix(channel string) string { return listenerPrefix(channel) }

// ListenerName is the name the store's LISTEN connection starts with.
func (s *Store) ListenerName() string { return s.listenerName }

// SetListenerCheck sets how long the store trusts its last look for other
// listeners, and so how long its own listener warms up; call it before the
// store appends or subscribes.
func (s *Store) SetListenerCheck(every time.Duration) { s.listenerCheck = every }

// AppendChecks names the checks of Append's statements for one event, in
// the order AppendSQL takes them.
var AppendChecks = []string{"last", "exact", "new"}

// AppendSQL is Append's statement for one event and check (see
// AppendChecks), with the store's schema, and how many parameters it
// takes; many events have one statement, whatever the check.
func (s *Store) AppendSQL(check int, many bool) (string, int) {
	if many {
		return s.sql.append, appendParams[checkLast]
	}
	return s.sql.appendOne[check], appendParams[check]
}
