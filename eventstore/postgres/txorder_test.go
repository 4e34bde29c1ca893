package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// maxTxAttempts bounds inTxRetrying: a transaction that keeps losing to
// younger writers is a failure of the test, not a reason to hang.
const maxTxAttempts = 100

// inTxRetrying runs fn in a transaction of the store as docs/postgres.md
// says to: when it fails with postgres.ErrTxTooOld, the whole transaction
// is rolled back and run again, which gives it a new, younger ID. It
// returns how many attempts it took.
func inTxRetrying(ctx context.Context, s *postgres.Store, fn func(ctx context.Context, tx pgx.Tx, attempt int) error) (int, error) {
	for attempt := 1; ; attempt++ {
		err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, tx, attempt) })
		if !errors.Is(err, postgres.ErrTxTooOld) || attempt == maxTxAttempts {
			return attempt, err
		}
	}
}

// versionOrder checks that each stream's events come in version order, from
// version 0, with no gap or repeat: what every projection and saga relies
// on when it reads the global log.
type versionOrder struct {
	next map[string]uint64
	seen int
}

func newVersionOrder() *versionOrder { return &versionOrder{next: make(map[string]uint64)} }

func (o *versionOrder) check(e eventstore.Event) error {
	want := o.next[e.StreamID]
	if e.Version != want {
		return fmt.Errorf("stream %q: version %d (position %s) came where version %d was due (event %d of the log)",
			e.StreamID, e.Version, e.Position, want, o.seen)
	}
	o.next[e.StreamID] = want + 1
	o.seen++
	return nil
}

// TestAppendTxNeverSortsBehindAYoungerTransaction is issue 11's
// reproduction: a transaction takes its ID with a first AppendTx, a younger
// transaction appends version 0 of another stream and commits, and the
// older one then appends version 1 of that stream. Written, version 1
// would come before version 0 in ReadAll. AppendTx refuses with
// ErrTxTooOld, and the retried transaction puts it after.
func TestAppendTxNeverSortsBehindAYoungerTransaction(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	a0, b1 := event("a0"), event("b1")
	var b0 eventstore.AppendResult
	var refused error
	var ownTx uint64
	attempts, err := inTxRetrying(ctx, s, func(ctx context.Context, tx pgx.Tx, attempt int) error {
		ra, err := s.AppendTx(ctx, tx, "inv-a", eventstore.NoStream, a0) // tx takes its ID
		if err != nil {
			return err
		}
		if attempt == 1 {
			ownTx = ra.Position.Major
			// A younger transaction appends to inv-b and commits first.
			b0, err = s.Append(ctx, "inv-b", eventstore.NoStream, event("b0"))
			require.NoError(t, err)
		}
		_, err = s.AppendTx(ctx, tx, "inv-b", eventstore.Exact(0), b1)
		if attempt == 1 {
			refused = err
			if err != nil {
				// The refusal leaves tx usable, like a version conflict.
				_, xerr := tx.Exec(ctx, "SELECT 1")
				require.NoError(t, xerr, "transaction unusable after ErrTxTooOld")
			}
		}
		return err
	})
	require.NoError(t, err)

	order := newVersionOrder()
	var log []eventstore.Event
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		log = append(log, e)
		require.NoError(t, order.check(e), "ReadAll delivered a stream out of version order")
	}
	require.Len(t, log, 3)
	assert.Equal(t, b1.ID, log[2].ID, "version 1 of inv-b comes last")

	require.ErrorIs(t, refused, postgres.ErrTxTooOld, "the first attempt must be refused")
	var tooOld *postgres.TxTooOldError
	require.ErrorAs(t, refused, &tooOld)
	assert.Equal(t, postgres.TxTooOldError{Stream: "inv-b", Version: 0, TxID: ownTx, LastTxID: b0.Position.Major}, *tooOld)
	assert.Less(t, tooOld.TxID, tooOld.LastTxID)
	for _, part := range []string{`"inv-b"`, "version 1", strconv.FormatUint(tooOld.TxID, 10), strconv.FormatUint(tooOld.LastTxID, 10)} {
		assert.Contains(t, refused.Error(), part)
	}
	assert.NotErrorIs(t, refused, eventstore.ErrWrongVersion, "retrying inside the transaction cannot help")
	assert.Equal(t, 2, attempts)
}

// TestAppendTxFirstWriteFollowsCommittedAppends checks what lets callers
// avoid the conflict: an AppendTx that is its transaction's first write
// takes the ID then, younger than every event it can see, even when the
// transaction began (and read) before the stream's last append.
func TestAppendTxFirstWriteFollowsCommittedAppends(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT 1") // began, read, no ID yet
		require.NoError(t, err)
		_, err = s.Append(ctx, "inv-b", eventstore.NoStream, event("b0"))
		require.NoError(t, err)
		_, err = s.AppendTx(ctx, tx, "inv-b", eventstore.Exact(0), event("b1"))
		return err
	}))
	order := newVersionOrder()
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		require.NoError(t, order.check(e))
	}
	assert.Equal(t, 2, order.seen)
}

// TestStreamsStayInVersionOrderUnderMixedAppends mixes Append and AppendTx
// from many goroutines on a few hot streams. Each transaction appends to
// two streams with delays in between (it takes its ID at the first and
// appends to the second after younger transactions have), and is retried
// whole on ErrTxTooOld. ReadAll and a live subscriber must deliver every
// committed event once, each stream in version order.
func TestStreamsStayInVersionOrderUnderMixedAppends(t *testing.T) {
	const (
		writers = 16
		rounds  = 25 // per writer
		streams = 6
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newStoreAt(t, withPoolSize(server.URL, writers+8), postgres.Options{PageSize: 64})

	// The subscriber restarts at random from the last event it saw, as
	// the no-skip proof's do, and checks each stream's order as it goes.
	sub := &noSkipSubscriber{
		seen:     make(map[uuid.UUID]eventstore.Position),
		want:     -1,
		complete: make(chan struct{}),
		stopped:  make(chan struct{}),
		order:    newVersionOrder(),
	}
	subCtx, stopSub := context.WithCancel(ctx)
	go func() {
		defer close(sub.stopped)
		sub.run(subCtx, s, 1)
	}()
	defer func() {
		stopSub()
		<-sub.stopped
	}()

	var (
		mu        sync.Mutex
		committed = make(map[uuid.UUID]bool)
		tooOld    int // whole-transaction retries
		most      int // the most retries one transaction needed
		failures  []error
	)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for range rounds {
				written, retries, err := mixedAppend(ctx, s, rng, streams)
				mu.Lock()
				tooOld += retries
				most = max(most, retries)
				if err != nil {
					failures = append(failures, err)
				}
				for _, id := range written {
					committed[id] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, failures, "appends failed")
	t.Logf("%d events committed; %d transactions retried whole after ErrTxTooOld, at most %d times in a row", len(committed), tooOld, most)

	// A disorder in ReadAll does not stop the test, so that Subscribe's
	// order is checked too.
	order := newVersionOrder()
	var disorder error
	read := 0
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		require.True(t, committed[e.ID], "ReadAll: event %s was never committed", e.ID)
		read++
		if disorder == nil {
			disorder = order.check(e)
		}
	}
	assert.NoError(t, disorder, "ReadAll")
	require.Equal(t, len(committed), read, "ReadAll: events")

	sub.setWant(len(committed))
	select {
	case <-sub.complete:
	case <-sub.stopped:
	case <-ctx.Done(): // liveness bound, not a speed check
	}
	require.NoError(t, sub.error(), "Subscribe")
	sub.mu.Lock()
	defer sub.mu.Unlock()
	require.Len(t, sub.seen, len(committed), "Subscribe: events seen")
	for id := range committed {
		_, ok := sub.seen[id]
		require.True(t, ok, "Subscribe never delivered committed event %s", id)
	}
	assert.Positive(t, tooOld, "no transaction was ever behind a younger one: the test proves less than it claims")
}

// mixedAppend does one writer's round: a third of the time a plain Append
// to one stream, otherwise a transaction that appends to two streams in
// name order (so that two transactions never wait on each other's rows in
// a cycle), sleeping after each append, retried whole on ErrTxTooOld. It
// returns the IDs it committed and how many retries that took.
func mixedAppend(ctx context.Context, s *postgres.Store, rng *rand.Rand, streams int) (written []uuid.UUID, retries int, err error) {
	stream := func(i int) string { return fmt.Sprintf("order-%d", i) }
	if rng.IntN(3) == 0 {
		evs := []eventstore.EventData{event("plain"), event("plain")}[:1+rng.IntN(2)]
		if _, err := s.Append(ctx, stream(rng.IntN(streams)), eventstore.Any, evs...); err != nil {
			return nil, 0, err
		}
		return ids(evs), 0, nil
	}
	pick := []int{rng.IntN(streams), rng.IntN(streams)}
	slices.Sort(pick)
	second := []eventstore.EventData{event("tx"), event("tx")}[:1+rng.IntN(2)]
	evs := [][]eventstore.EventData{{event("tx")}, second}
	delays := []time.Duration{time.Duration(rng.IntN(3000)) * time.Microsecond, time.Duration(rng.IntN(3000)) * time.Microsecond}
	attempts, err := inTxRetrying(ctx, s, func(ctx context.Context, tx pgx.Tx, _ int) error {
		for i, at := range pick {
			if _, err := s.AppendTx(ctx, tx, stream(at), eventstore.Any, evs[i]...); err != nil {
				return err
			}
			time.Sleep(delays[i])
		}
		return nil
	})
	if err != nil {
		return nil, attempts - 1, err
	}
	s.Notify()
	return append(ids(evs[0]), ids(evs[1])...), attempts - 1, nil
}

func ids(evs []eventstore.EventData) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}
