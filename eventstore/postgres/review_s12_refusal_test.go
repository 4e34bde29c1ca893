package postgres_test

// Review S12: what a refused append costs the server. See review_s12_test.go.

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// s12ServerCounters are what the server has spent: WAL written, and
// transaction IDs handed out (the probe itself takes one).
func s12ServerCounters(t testing.TB, s *postgres.Store) (wal int64, xid uint64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&wal))
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&xid))
	return wal, xid
}

// A refused append "writes nothing" (docs/guarantees.md, WrongVersionError),
// on the server too. At 23d4d71 a stale Exact or NoStream refusal that
// raced nobody was an insert that the unique index refused: the row, its
// TOASTed payload and its entries in the other indexes written (WAL), a
// transaction ID burnt and a dead tuple left for VACUUM, for every
// refusal, as a hot aggregate's losers under the command bus make on
// every retry. Since, the conflict clause refuses before anything is
// written: no row, no WAL but a commit record. It does form the row first,
// and its tx_id's default takes a transaction ID, one per refusal at most
// (as any append's; a write that wrote nothing commits without waiting for
// a flush), which the statement that read the last version did not. This
// test makes 40 stale refusals of a 256 KiB event and measures the server.
func TestReviewS12StaleRefusalWritesNothingOnTheServer(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	_, err := s.Append(ctx, "stale", eventstore.NoStream, s12Evs("x", 3)...)
	require.NoError(t, err)
	big := func() eventstore.EventData {
		b := make([]byte, 256<<10)
		for i := range b {
			b[i] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/"[rand.IntN(64)]
		}
		e := s12Ev("big")
		e.Data = []byte(`"` + string(b) + `"`)
		return e
	}
	const refusals = 40
	for _, c := range []struct {
		name     string
		expected eventstore.ExpectedVersion
	}{{"Exact(0)", eventstore.Exact(0)}, {"NoStream", eventstore.NoStream}} {
		t.Run(c.name, func(t *testing.T) {
			events := make([]eventstore.EventData, refusals)
			for i := range events {
				events[i] = big()
			}
			wal0, xid0 := s12ServerCounters(t, s)
			for _, e := range events {
				_, err := s.Append(ctx, "stale", c.expected, e)
				s12RequireWrongVersion(t, err, "stale", c.expected, eventstore.Exact(2))
			}
			wal1, xid1 := s12ServerCounters(t, s)
			t.Logf("%d refusals of 256 KiB events: %d KiB of WAL, %d transaction IDs", refusals, (wal1-wal0)>>10, xid1-xid0-1)
			assert.LessOrEqual(t, xid1-xid0-1, uint64(refusals), "refused appends took more than a transaction ID each")
			assert.Less(t, wal1-wal0, int64(refusals*256<<10/8), "refused appends wrote their payloads to the WAL")
		})
	}
	require.Len(t, s12Read(t, s, "stale"), 3)
}

// Under simple_protocol (the mode for PgBouncer in transaction mode,
// docs/postgres.md) pgx inlines the parameters into the statement text,
// and PostgreSQL logs the text of a statement that fails with an ERROR
// (log_min_error_statement's default). At 23d4d71 a stale Exact or
// NoStream refusal was such an error, so the refused event's payload,
// correlation ID and metadata landed in the server log on every refusal;
// a refusal that races nobody must be no error and log nothing. This test
// reads the throwaway server's log (next to its data directory, where
// pgtest writes it); a server that CAIRN_POSTGRES_URL names keeps its log
// where this test cannot read it, and only then is the test skipped.
func TestReviewS12StaleRefusalKeepsPayloadOutOfServerLog(t *testing.T) {
	if os.Getenv(pgtest.URLEnv) != "" {
		t.Skipf("the server that %s names keeps its log out of this test's reach", pgtest.URLEnv)
	}
	ctx := context.Background()
	s := s12Store(t, "simple_protocol", 0)
	var dataDir string
	require.NoError(t, s.Pool().QueryRow(ctx, `SHOW data_directory`).Scan(&dataDir))
	logPath := filepath.Join(filepath.Dir(dataDir), "server.log")
	_, err := os.ReadFile(logPath)
	require.NoError(t, err, "the throwaway server's log")
	_, err = s.Append(ctx, "stale-log", eventstore.NoStream, s12Evs("x", 2)...)
	require.NoError(t, err)
	secret := "card-4111111111111111-" + uuid.NewString()
	for _, exp := range []eventstore.ExpectedVersion{eventstore.NoStream, eventstore.Exact(0)} {
		e := s12Ev("payment")
		e.Data = []byte(`{"pan":"` + secret + `"}`)
		e.Metadata.CorrelationID = secret
		_, err := s.Append(ctx, "stale-log", exp, e)
		s12RequireWrongVersion(t, err, "stale-log", exp, eventstore.Exact(1))
	}
	// The server writes its log unbuffered; give it a moment all the same.
	var log []byte
	for deadline := time.Now().Add(time.Second); ; time.Sleep(50 * time.Millisecond) {
		log, err = os.ReadFile(logPath)
		require.NoError(t, err)
		if strings.Contains(string(log), secret) {
			break
		}
		if time.Now().After(deadline) {
			return // nothing of the refused events was logged
		}
	}
	i := strings.Index(string(log), secret)
	lo := max(0, strings.LastIndex(string(log[:i]), "ERROR"))
	t.Fatalf("a refused append's payload is in the server log:\n%s", clipS12(string(log[lo:]), 1200))
}

func clipS12(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
