package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// openRounds is how many times TestOpenANewFileTogether opens a new file.
const openRounds = 50

// TestOpenANewFileTogether opens a new file from four stores at once, as
// deployments that start together do, and closes them, 50 times: every
// open must succeed. Found by the two-deployments test (issue 14), which
// starts its two deployments at once. Before the fix about one round in a
// hundred failed in one of two ways: SQLITE_BUSY from SQLite's switch of the
// new file into WAL mode, which does not wait for a lock (see also
// TestOpenWhileANewFileIsCreated); or a FileError calling the file another
// application's, as the first look at it read its application ID before
// another store's migration committed and its tables after. (A run of this
// test caught the second in 4 runs of 20 before the fix.)
func TestOpenANewFileTogether(t *testing.T) {
	ctx := context.Background()
	for round := range openRounds {
		path := filepath.Join(t.TempDir(), "events.db")
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := sqlite.Open(ctx, path, sqlite.Options{})
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "round %d, store %d", round, i)
		}
	}
}

// TestOpenWhileANewFileIsCreated opens a new file while another connection
// holds its write lock, as a process that is creating it does: Open must
// wait for the lock, as every statement does for up to
// Options.BusyTimeout, not fail at once with SQLITE_BUSY. SQLite takes the
// exclusive lock that puts a file into WAL mode without its busy handler,
// so Open now retries that step itself.
func TestOpenWhileANewFileIsCreated(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	require.NoError(t, err)
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock, and nothing written
	require.NoError(t, err)
	time.AfterFunc(300*time.Millisecond, func() { _ = tx.Rollback() })
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
