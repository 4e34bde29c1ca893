package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// Two stores on one file behave as two processes do: each has its own
// writer, they take turns on the file's write lock, positions stay dense,
// and a subscriber of one sees the other's appends by polling.
func TestTwoStoresOnOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	opts := sqlite.Options{PollInterval: 20 * time.Millisecond}
	a, err := sqlite.Open(ctx, path, opts)
	require.NoError(t, err)
	defer a.Close()
	b, err := sqlite.Open(ctx, path, opts)
	require.NoError(t, err)
	defer b.Close()

	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(chan eventstore.Event, 100)
	go func() {
		for e, err := range a.Subscribe(subCtx, eventstore.Start, eventstore.Filter{}) {
			if err != nil {
				close(seen)
				return
			}
			seen <- e
		}
	}()

	const each = 20
	var wg sync.WaitGroup
	for i, s := range []*sqlite.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				_, err := s.Append(ctx, fmt.Sprintf("store-%d", i), eventstore.Any, event(fmt.Sprint("e", j)))
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	// Only polling can show this one to a's subscriber: a commits nothing
	// after it.
	_, err = b.Append(ctx, "store-1", eventstore.Any, event("last"))
	require.NoError(t, err)

	var got []eventstore.Event
	timeout := time.After(30 * time.Second)
	for len(got) < 2*each+1 {
		select {
		case e, ok := <-seen:
			require.True(t, ok, "the subscription ended")
			got = append(got, e)
		case <-timeout:
			require.FailNow(t, "the subscriber did not see the other store's appends", "saw %d of %d", len(got), 2*each+1)
		}
	}
	for i, e := range got {
		assert.Equal(t, uint64(i+1), e.Position.Major, "positions are dense across both writers")
	}
}

// Reads canceled at every moment must not leave a pooled connection inside
// a transaction, where it would serve an old snapshot to later readers.
func TestCanceledReadsLeaveNoStaleSnapshot(t *testing.T) {
	s := openTemp(t, sqlite.Options{MaxReaders: 2})
	ctx := context.Background()
	for i := range 150 {
		r, err := s.Append(ctx, "order-1", eventstore.Any, event("x"))
		require.NoError(t, err)
		readCtx, cancel := context.WithCancel(ctx)
		go func() {
			time.Sleep(time.Duration(i%50) * 10 * time.Microsecond)
			cancel()
		}()
		for _, err := range s.ReadAll(readCtx, eventstore.Position{Major: r.Position.Major - 1}, eventstore.Filter{}) {
			if err != nil {
				break
			}
		}
		cancel()
		var last eventstore.Position
		for e, err := range s.ReadAll(ctx, eventstore.Position{Major: r.Position.Major - 1}, eventstore.Filter{}) {
			require.NoError(t, err, "iteration %d", i)
			last = e.Position
		}
		require.Equal(t, r.Position, last, "iteration %d: a read missed the latest append", i)
	}
}

// TestALockHeldPastTheBusyTimeoutIsErrBusy: while one store holds the
// file's write lock (a long InTx, as a slow projection handler does) for
// longer than another store's Options.BusyTimeout, the other's append,
// transaction and Open fail with a FileError matching ErrBusy (and
// eventstore.ErrUnavailable) that names the file, and write nothing; once the lock is free, the same calls
// succeed. Found by the two-deployments test (issue 14), whose read model
// held the lock for seconds: the other deployment got SQLite's bare
// "database is locked", which named no file and matched no error of
// Cairn's, so a caller could not tell it from a failure worth alarm.
func TestALockHeldPastTheBusyTimeoutIsErrBusy(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	holder, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer holder.Close()
	impatient := sqlite.Options{BusyTimeout: 50 * time.Millisecond}
	other, err := sqlite.Open(ctx, path, impatient)
	require.NoError(t, err)
	defer other.Close()

	locked, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- holder.InTx(ctx, func(context.Context, *sql.Tx) error {
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	requireBusy := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, sqlite.ErrBusy, what)
		require.ErrorIs(t, err, eventstore.ErrUnavailable, what)
		var fe *sqlite.FileError
		require.ErrorAs(t, err, &fe, what)
		assert.Equal(t, path, fe.Path, what)
	}
	_, err = other.Append(ctx, "order-1", eventstore.NoStream, event("order.placed"))
	requireBusy(err, "append")
	requireBusy(other.InTx(ctx, func(context.Context, *sql.Tx) error { return nil }), "InTx")
	_, err = sqlite.Open(ctx, path, impatient)
	requireBusy(err, "Open")

	close(release)
	require.NoError(t, <-held)
	res, err := other.Append(ctx, "order-1", eventstore.NoStream, event("order.placed"))
	require.NoError(t, err, "the failed append wrote nothing")
	assert.Equal(t, uint64(0), res.LastVersion, "the first event of the stream")
	reopened, err := sqlite.Open(ctx, path, impatient)
	require.NoError(t, err)
	require.NoError(t, reopened.Close())
}
