package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-es/cairn/eventstore"
)

// Group commit: concurrent single-event Appends of one store share a
// transaction and a round trip. On a server of few cores most of an
// append's cost, in the server and in the client, is the transaction and
// the round trip, not the row: 16 writers spend several times less CPU per
// event in groups of about 8 (BenchmarkCeiling, conc16).
//
// A group is one pipelined batch, hence one implicit transaction, of one
// insert per append. Each insert is an optimistic fast path that writes
// its event or nothing; whatever it does not write its caller then appends
// alone, from the start, as if the group had not been. So every append's
// result is what it would be alone:
//
//   - The inserts raise no unique violation (ON CONFLICT DO NOTHING), so one
//     append's conflict leaves the others' inserts standing; the conflicting
//     one wrote nothing and finds out why alone (explain).
//   - A multi-event append never joins a group: ON CONFLICT could keep some
//     of its events and not others.
//   - Any error the server reports rolls the whole group back (it is one
//     transaction: a deadlock with a transaction of another process, a
//     serialization failure, bad data), and every append runs alone. Other
//     errors (the connection lost) leave the commit unknown, as they would
//     for an append alone, and are returned to every append of the group.
//   - Order: the group takes its transaction ID at its first insert, after
//     that statement's snapshot (see Append). A later insert of the group
//     takes a newer snapshot, which may see an event of a younger
//     transaction: it carries AppendTx's younger-writer check and writes
//     nothing then, so no event sorts before its stream's earlier ones.
//     Appends that return before another is submitted are in different
//     groups, the later with the younger transaction.
//
// An append that finds no other single-event append of the store under
// way runs alone, as it always did (Append). Those that overlap are handed
// to groupWorkers goroutines, each taking the appends that wait when it is
// free: a group forms only from appends that would otherwise each take a
// connection, a transaction and a round trip at the same time.

// groupWorkers is how many groups may be on their way at once: while one
// waits for its commit to be flushed, the next forms.
const groupWorkers = 2

// maxGroup bounds the appends of one group.
const maxGroup = 32

// groupAppend is one append in a group.
type groupAppend struct {
	args []any // the group insert's parameters
	done chan struct{}
	// Set by the worker before done closes: the append's result when
	// written, err when the group failed with an error to return, and
	// neither when the caller must append alone.
	r       eventstore.AppendResult
	written bool
	err     error
}

// stream is the name of the stream g appends to: the first parameter of
// the group insert, as of every append statement (appendStatement).
func (g *groupAppend) stream() string {
	name, _ := g.args[0].(string)
	return name
}

// groupAppendOne appends a single event through a group. It returns
// alone true when the caller must append it on its own, from the start.
func (s *Store) groupAppendOne(ctx context.Context, st appendStatement) (r eventstore.AppendResult, alone bool, err error) {
	g := &groupAppend{args: st.all, done: make(chan struct{})}
	// The channel is unbuffered, so an append is only ever handed to a
	// worker that runs it: once the workers stop (Close), none is
	// left behind in a queue.
	select {
	case s.groups <- g:
	case <-s.done:
		return r, false, eventstore.ErrClosed
	case <-ctx.Done():
		return r, false, ctx.Err()
	}
	select {
	case <-g.done:
	case <-ctx.Done():
		// The group may still commit the event, as an append whose commit
		// acknowledgement is lost may; a retry with the same event ID is
		// told it is a duplicate.
		return r, false, ctx.Err()
	}
	if g.err != nil {
		return r, false, g.err
	}
	return g.r, !g.written, nil
}

// groupWorker sends the groups of waiting appends until the store closes.
func (s *Store) groupWorker() {
	defer s.workers.Done()
	batch := make([]*groupAppend, 0, maxGroup)
	for {
		batch = batch[:0]
		select {
		case <-s.workerCtx.Done():
			return
		case g := <-s.groups:
			batch = append(batch, g)
		}
	more:
		for len(batch) < maxGroup {
			select {
			case g := <-s.groups:
				batch = append(batch, g)
			default:
				break more
			}
		}
		s.sendGroup(batch)
	}
}

// sendGroup runs one group and tells its appends the outcome.
func (s *Store) sendGroup(batch []*groupAppend) {
	if len(batch) == 1 {
		// A plain query costs the client less than a batch of one.
		g := batch[0]
		var err error
		g.r, g.written, err = s.tryAppend(s.workerCtx, s.pool, appendStatement{sql: s.sql.appendGroup, args: g.args})
		s.groupDone(batch, err)
		return
	}
	// In stream order, so that two groups on their way at once that write
	// the same streams take their index entries in one order and never
	// wait on each other in a cycle (a deadlock the server would break
	// only after deadlock_timeout, a second by default). The appends of a
	// group are concurrent: any order of them is one they could have had.
	slices.SortFunc(batch, func(a, b *groupAppend) int { return strings.Compare(a.stream(), b.stream()) })
	b := &pgx.Batch{}
	for _, g := range batch {
		b.Queue(s.sql.appendGroup, g.args...).Query(func(rows pgx.Rows) error {
			var o appendOutcome
			err := o.read(rows)
			g.r, g.written = o.result()
			return err
		})
	}
	s.groupDone(batch, s.pool.SendBatch(s.workerCtx, b).Close())
}

// groupDone tells the appends of a group its outcome, err.
func (s *Store) groupDone(batch []*groupAppend, err error) {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		for _, g := range batch {
			if g.written {
				s.wake()
				break
			}
		}
	case errors.As(err, &pgErr):
		// The server rolled the group back: each append runs alone.
		for _, g := range batch {
			g.r, g.written = eventstore.AppendResult{}, false
		}
	default:
		err = s.closedOr(err)
		for _, g := range batch {
			g.r, g.written, g.err = eventstore.AppendResult{}, false, err
		}
	}
	for _, g := range batch {
		close(g.done)
	}
}
