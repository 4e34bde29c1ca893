package postgres

// CommandResultSQL is the statement behind CommandResult, with the store's
// schema, so that a test can EXPLAIN it.
func (s *Store) CommandResultSQL() string { return s.fill(commandResultSQL) }
