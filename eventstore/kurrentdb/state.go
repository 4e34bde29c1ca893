package kurrentdb

import "strings"

// StatePrefix starts the names of the streams in which the store keeps its
// consumers' state (checkpoints, leases, dead letters, snapshots). Append
// refuses them, and ReadAll, Subscribe and ReadStream leave them out.
const StatePrefix = "cairn:"

// isState reports whether stream is one of the store's own.
func isState(stream string) bool { return strings.HasPrefix(stream, StatePrefix) }
