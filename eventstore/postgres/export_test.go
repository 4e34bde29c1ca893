package postgres

// CommandResultSQL is the statement behind CommandResult, with the store's
// schema, so that a test can EXPLAIN it.
func (s *Store) CommandResultSQL() string { return s.fill(commandResultSQL) }

// CommandDerivedSQL is the statement that finds an append of the command
// bus, with the store's schema, so that a test can EXPLAIN it.
func (s *Store) CommandDerivedSQL() string { return s.fill(commandDerivedSQL) }
