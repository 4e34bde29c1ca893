package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// BenchmarkInTxBatch is one transactional projection batch on the durable
// defaults: 100 counter upserts and the checkpoint's move, in one InTx.
func BenchmarkInTxBatch(b *testing.B) {
	ctx := context.Background()
	s := openTemp(b, sqlite.Options{})
	err := s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE counters (key TEXT PRIMARY KEY, n INTEGER NOT NULL)`)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	var at eventstore.Position
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next := eventstore.Position{Major: at.Major + 100}
		err := s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			for k := range 100 {
				if _, err := tx.ExecContext(ctx, `INSERT INTO counters (key, n) VALUES (?, 1)
					ON CONFLICT (key) DO UPDATE SET n = n + 1`, fmt.Sprint("k", k%10)); err != nil {
					return err
				}
			}
			return s.SaveCheckpointTx(ctx, tx, "bench", at, next, 0)
		})
		if err != nil {
			b.Fatal(err)
		}
		at = next
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRenewLease is what a lease holder pays every third of its TTL.
func BenchmarkRenewLease(b *testing.B) {
	ctx := context.Background()
	s := openTemp(b, sqlite.Options{})
	l, ok, err := s.AcquireLease(ctx, "bench", "me", time.Minute)
	if err != nil || !ok {
		b.Fatal(ok, err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if l, err = s.RenewLease(ctx, l, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommandResult is the command bus's lookup of a redelivered
// command, in a stream of 1000 events.
func BenchmarkCommandResult(b *testing.B) {
	ctx := context.Background()
	s := openTemp(b, sqlite.Options{Synchronous: sqlite.SyncNormal})
	for i := range 1000 {
		e := eventstore.EventData{Type: "x", Data: []byte(`{}`)}
		e.Metadata.CommandID = fmt.Sprint("cmd-", i)
		if _, err := s.Append(ctx, "order-1", eventstore.Any, e); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, found, err := s.CommandResult(ctx, "order-1", fmt.Sprint("cmd-", i%1000)); err != nil || !found {
			b.Fatal(found, err)
		}
	}
}
