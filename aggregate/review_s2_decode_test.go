package aggregate_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// Review (S2): events that encoding/json encodes and decodes back, which
// the JSON serializer's new decoder (encoding/json/v2 with v1 options)
// decodes otherwise: Save's state and a fresh Load's differ, or the
// stream no longer loads.

type (
	// RVEmojiTagged has a tag name encoding/json finds invalid (not a
	// letter, digit or allowed punctuation): it encodes and decodes the
	// field as "Score".
	RVEmojiTagged struct {
		Score int `json:"😀"`
	}
	// RVNumberKeys has a map keyed by json.Number, whose keys
	// encoding/json writes and reads as any string.
	RVNumberKeys struct {
		ByCode map[json.Number]int `json:"by_code"`
	}
)

type rvLedger struct {
	Score int
	Codes map[json.Number]int
}

func (l *rvLedger) Handle(_ context.Context, cmd any) ([]any, error) { return cmd.([]any), nil }

func (l *rvLedger) Apply(event any) error {
	switch e := event.(type) {
	case RVEmojiTagged:
		l.Score += e.Score
	case RVNumberKeys:
		l.Codes = e.ByCode
	default:
		return errors.New("unknown event")
	}
	return nil
}

func rvLedgerRepo(t *testing.T) *aggregate.Repository[rvLedger, *rvLedger] {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[RVEmojiTagged](reg, "rv.emoji", 1))
	require.NoError(t, codec.Register[RVNumberKeys](reg, "rv.codes", 1))
	typ, err := aggregate.NewType[rvLedger]("rvledger", aggregate.Options[rvLedger]{})
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	return repo
}

// The encoded event is {"Score":7}: encoding/json gives Score back, the new
// decoder looks for "😀" and drops it.
func TestReviewS2SaveLoadInvalidTagName(t *testing.T) {
	data, _ := json.Marshal(RVEmojiTagged{Score: 7})
	var std RVEmojiTagged
	require.NoError(t, json.Unmarshal(data, &std))
	require.Equal(t, 7, std.Score, "encoding/json round trip of %s", data)

	ctx := context.Background()
	repo := rvLedgerRepo(t)
	inst, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	_, err = repo.Save(ctx, inst, []any{RVEmojiTagged{Score: 7}}, aggregate.SaveOptions{})
	require.NoError(t, err)
	loaded, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, 7, inst.State.Score, "state after Save")
	assert.Equal(t, 7, loaded.State.Score, "state after a fresh Load")
}

// The encoded event is {"by_code":{"abc":1}}: encoding/json reads it back,
// the new decoder refuses the key as not a number, and the stream no
// longer loads.
func TestReviewS2SaveLoadNumberKeys(t *testing.T) {
	ctx := context.Background()
	repo := rvLedgerRepo(t)
	inst, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	ev := RVNumberKeys{ByCode: map[json.Number]int{"abc": 1}}
	data, _ := json.Marshal(ev)
	var std RVNumberKeys
	require.NoError(t, json.Unmarshal(data, &std), "encoding/json reads back %s", data)

	_, err = repo.Save(ctx, inst, []any{ev}, aggregate.SaveOptions{})
	require.NoError(t, err, "Save")
	loaded, err := repo.Load(ctx, "1")
	require.NoError(t, err, "Load")
	assert.Equal(t, inst.State, loaded.State)
}
