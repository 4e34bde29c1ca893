package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// BenchmarkCommandResult measures how the bus recognizes a redelivered
// command below its snapshot: one index lookup in a stream of 10,000
// events, one in ten of them carrying a command ID.
func BenchmarkCommandResult(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, postgres.Options{})
	const events = 10_000
	for i := 0; i < events; i += 100 {
		batch := make([]eventstore.EventData, 100)
		for j := range batch {
			batch[j] = eventstore.EventData{Type: "t", SchemaVersion: 1, Data: []byte("{}")}
			if (i+j)%10 == 0 {
				batch[j].Metadata.CommandID = fmt.Sprint("cmd-", i+j)
			}
		}
		_, err := s.Append(ctx, "hot-1", eventstore.Any, batch...)
		require.NoError(b, err)
	}
	_, err := s.Pool().Exec(ctx, `ANALYZE `+pgx.Identifier{s.Schema(), "events"}.Sanitize())
	require.NoError(b, err)
	n := 0
	b.ResetTimer()
	for range b.N {
		_, found, err := s.CommandResult(ctx, "hot-1", fmt.Sprint("cmd-", (n*70)%events))
		if err != nil || !found {
			b.Fatal(err, found)
		}
		n++
	}
}

// BenchmarkTxBatch measures a transactional projection's commit: a batch
// of 100 events, each an upsert into a read-model table, and the checkpoint
// move, in one transaction. Compare events/s with the append rate.
func BenchmarkTxBatch(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, postgres.Options{})
	table := pgx.Identifier{s.Schema(), "totals"}.Sanitize()
	_, err := s.Pool().Exec(ctx, `CREATE TABLE `+table+` (key text PRIMARY KEY, n bigint NOT NULL)`)
	require.NoError(b, err)
	upsert := `INSERT INTO ` + table + ` AS t (key, n) VALUES ($1, 1) ON CONFLICT (key) DO UPDATE SET n = t.n + 1`
	const batch = 100
	at := eventstore.Start
	b.ResetTimer()
	for range b.N {
		next := eventstore.Position{Major: at.Major + 1}
		err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			for i := range batch {
				if _, err := tx.Exec(ctx, upsert, fmt.Sprint("key-", i%20)); err != nil {
					return err
				}
			}
			return s.SaveCheckpointTx(ctx, tx, "bench", at, next, 1)
		})
		if err != nil {
			b.Fatal(err)
		}
		at = next
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkLeaseRenew measures what a lease holder pays every third of
// its TTL.
func BenchmarkLeaseRenew(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, postgres.Options{})
	l, ok, err := s.AcquireLease(ctx, "bench", "me", time.Minute)
	require.NoError(b, err)
	require.True(b, ok)
	b.ResetTimer()
	for range b.N {
		if l, err = s.RenewLease(ctx, l, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}
