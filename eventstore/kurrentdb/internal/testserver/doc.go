// Package testserver is an in-process KurrentDB look-alike at the gRPC
// protocol level, for tests of Cairn's KurrentDB store.
//
// A real esdb.Client (EventStore-Client-Go v4) connects to it over TCP on
// 127.0.0.1, so the adapter under test runs its real wire path: the client's
// marshalling, error mapping, reconnects and deadlines. The server keeps its
// log in memory and imitates the server behaviour the adapter depends on:
// expected-revision checks with KurrentDB's idempotency rules (made
// deterministic), (commit, prepare) positions with gaps, reads of streams and
// of $all, catch-up and live subscriptions with server-side filters and
// checkpoints, soft deletes, tombstones, $maxCount and $tb, and the system
// events a real $all holds ($stats, $metadata, $streamDeleted). Its fault
// methods drop subscriptions, fail, delay or disconnect calls, and restart the
// server on the same port while keeping the log.
//
// It never imports the client's protos/status or protos/code packages: they
// panic at init beside esdb (proto name conflicts with genproto).
package testserver
