package projectiontest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/check"
)

// forgetfulParks is a store whose transactional park answers as if it
// had stored the dead letter, but writes nothing: the insert that a store
// author left out of the transaction's statements.
type forgetfulParks struct{ *memory.Store }

func (s forgetfulParks) ParkDeadLetterTx(_ context.Context, _ *memory.Tx, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if d.ID == "" {
		d.ID = ulid.Make().String()
	}
	d.Generation++
	return d, nil
}

// harness is the suite's harness on memory stores, their consumer part
// wrapped by wrap.
func harness(wrap func(*memory.Store) ConsumerStore[*memory.Tx]) Harness[*memory.Tx] {
	return Harness[*memory.Tx]{
		New: func(t testing.TB) Stores[*memory.Tx] {
			s := memory.New()
			t.Cleanup(func() { _ = s.Close() })
			return Stores[*memory.Tx]{Events: s, Consumers: wrap(s)}
		},
		Add: func(_ context.Context, tx *memory.Tx, key string, delta int64) error {
			v, _ := tx.Get(key)
			n, _ := strconv.ParseInt(string(v), 10, 64)
			tx.Put(key, strconv.AppendInt(nil, n+delta, 10))
			return nil
		},
		Get: func(t testing.TB, s Stores[*memory.Tx], key string) int64 {
			v, _ := s.Events.(*memory.Store).Value(key)
			n, _ := strconv.ParseInt(string(v), 10, 64)
			return n
		},
	}
}

// The suite must fail a store that loses the dead letters parked in a
// transaction, and pass the memory store itself on the same case.
func TestFailsLostDeadLetters(t *testing.T) {
	broken := harness(func(s *memory.Store) ConsumerStore[*memory.Tx] { return forgetfulParks{s} })
	failures := check.Record(t, func(t testing.TB) { testParksTx(t, broken) })
	t.Logf("the suite reported: %s", strings.Join(failures, "\n"))
	require.NotEmpty(t, failures, "the suite passed a store that loses dead letters")
	assert.Contains(t, failures[0], "has 0 elements, want 2")

	sound := harness(func(s *memory.Store) ConsumerStore[*memory.Tx] { return s })
	assert.Empty(t, check.Record(t, func(t testing.TB) { testParksTx(t, sound) }))
}
