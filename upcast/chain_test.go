package upcast_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

func appendTo(suffix string) func(upcast.Raw) (upcast.Raw, error) {
	return func(r upcast.Raw) (upcast.Raw, error) {
		r.Data = append(append([]byte(nil), r.Data...), suffix...)
		return r, nil
	}
}

func chainOf(t *testing.T, steps ...upcast.Step) *upcast.Chain {
	t.Helper()
	var c upcast.Chain
	require.NoError(t, c.Add(steps...))
	return &c
}

func TestApplyWithoutStepsPassesThrough(t *testing.T) {
	var c upcast.Chain
	in := upcast.Raw{Type: "a", Version: 1, Data: []byte("x")}
	out, err := c.Apply(nil, in)
	require.NoError(t, err)
	assert.Equal(t, []upcast.Raw{in}, out)
}

func TestTransformChainRunsInOrder(t *testing.T) {
	c := chainOf(t,
		upcast.Transform("a", 2, appendTo("+2")),
		upcast.Transform("a", 1, appendTo("+1")),
		upcast.Transform("a", 3, func(r upcast.Raw) (upcast.Raw, error) {
			// Built from scratch: zero metadata keeps the input's; type and
			// version are the step's.
			return upcast.Raw{Type: "ignored", Version: 99, Data: append(append([]byte(nil), r.Data...), "+3"...)}, nil
		}),
	)
	meta := eventstore.Metadata{CorrelationID: "c", Extra: map[string]string{"k": "v"}}
	out, err := c.Apply(nil, upcast.Raw{Type: "a", Version: 1, Data: []byte("x"), Metadata: meta})
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, upcast.Key{Type: "a", Version: 4}, out[0].Key())
	assert.Equal(t, "x+1+2+3", string(out[0].Data))
	assert.Equal(t, meta, out[0].Metadata)

	// Starting in the middle runs only the rest.
	out, err = c.Apply(nil, upcast.Raw{Type: "a", Version: 3, Data: []byte("y")})
	require.NoError(t, err)
	assert.Equal(t, "y+3", string(out[0].Data))
}

func TestStepCannotChangeStoredMetadata(t *testing.T) {
	c := chainOf(t, upcast.Transform("a", 1, func(r upcast.Raw) (upcast.Raw, error) {
		r.Metadata.Extra["k"] = "changed"
		r.Metadata.Extra["new"] = "x"
		return r, nil
	}))
	stored := eventstore.Metadata{Extra: map[string]string{"k": "v"}}
	out, err := c.Apply(nil, upcast.Raw{Type: "a", Version: 1, Data: []byte{}, Metadata: stored})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"k": "v"}, stored.Extra, "the stored event's map is untouched")
	assert.Equal(t, map[string]string{"k": "changed", "new": "x"}, out[0].Metadata.Extra)
}

func TestRenameKeepsDataAndContinues(t *testing.T) {
	c := chainOf(t,
		upcast.Rename("order.payment_accepted", 1, "finance.payment_received", 1),
		upcast.Transform("finance.payment_received", 1, appendTo("!")),
	)
	out, err := c.Apply(nil, upcast.Raw{Type: "order.payment_accepted", Version: 1, Data: []byte("p")})
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, upcast.Key{Type: "finance.payment_received", Version: 2}, out[0].Key())
	assert.Equal(t, "p!", string(out[0].Data))
}

func TestSplitYieldsPartsThroughTheChain(t *testing.T) {
	c := chainOf(t,
		upcast.Split("a", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
			return []upcast.Raw{
				{Type: "a", Version: 2, Data: []byte("first")},
				{Type: "b", Version: 1, Data: []byte("second"), Metadata: eventstore.Metadata{CausationID: "own"}},
				{Type: "gone", Version: 1, Data: []byte("dropped")},
			}, nil
		}).Into(upcast.Key{Type: "a", Version: 2}, upcast.Key{Type: "b", Version: 1}, upcast.Key{Type: "gone", Version: 1}),
		upcast.Transform("b", 1, appendTo("!")),
		upcast.Drop("gone", 1),
	)
	meta := eventstore.Metadata{CorrelationID: "c", Extra: map[string]string{"k": "v"}}
	out, err := c.Apply(nil, upcast.Raw{Type: "a", Version: 1, Data: []byte("x"), Metadata: meta})
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.Equal(t, upcast.Raw{Type: "a", Version: 2, Data: []byte("first"), Metadata: meta}, out[0])
	assert.Equal(t, upcast.Raw{Type: "b", Version: 2, Data: []byte("second!"), Metadata: eventstore.Metadata{CausationID: "own"}}, out[1])
}

func TestSplitRejectsUndeclaredPart(t *testing.T) {
	c := chainOf(t, upcast.Split("a", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
		return []upcast.Raw{{Type: "a", Version: 2}, {Type: "c", Version: 7}}, nil
	}).Into(upcast.Key{Type: "a", Version: 2}))
	dst := []upcast.Raw{{Type: "earlier"}}
	out, err := c.Apply(dst, upcast.Raw{Type: "a", Version: 1})
	require.ErrorIs(t, err, upcast.ErrStepFailed)
	assert.Contains(t, err.Error(), `part 1 is "c" v7`)
	assert.Equal(t, dst, out, "nothing half-written")
}

func TestSplitIntoNothingDrops(t *testing.T) {
	c := chainOf(t, upcast.Split("a", 1, func(upcast.Raw) ([]upcast.Raw, error) { return nil, nil }).Into())
	out, err := c.Apply(nil, upcast.Raw{Type: "a", Version: 1})
	require.NoError(t, err)
	assert.Empty(t, out)
}

func TestDrop(t *testing.T) {
	c := chainOf(t, upcast.Transform("a", 1, appendTo("!")), upcast.Drop("a", 2))
	out, err := c.Apply(nil, upcast.Raw{Type: "a", Version: 1})
	require.NoError(t, err)
	assert.Empty(t, out)
	out, err = c.Apply(nil, upcast.Raw{Type: "a", Version: 3})
	require.NoError(t, err)
	assert.Len(t, out, 1, "only the dropped version is dropped")
}

func TestStepFailuresAreTyped(t *testing.T) {
	cause := errors.New("no currency")
	c := chainOf(t,
		upcast.Transform("fails", 1, func(upcast.Raw) (upcast.Raw, error) { return upcast.Raw{}, cause }),
		upcast.Transform("panics", 1, func(r upcast.Raw) (upcast.Raw, error) { _ = r.Data[10]; return r, nil }),
		upcast.Split("split.fails", 1, func(upcast.Raw) ([]upcast.Raw, error) { return nil, cause }),
		upcast.Split("split.panics", 1, func(upcast.Raw) ([]upcast.Raw, error) { panic("bad layout") }),
	)
	for _, name := range []string{"fails", "panics", "split.fails", "split.panics"} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Apply(nil, upcast.Raw{Type: name, Version: 1, Data: []byte("x")})
			require.ErrorIs(t, err, upcast.ErrStepFailed)
			var se *upcast.StepError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, upcast.Key{Type: name, Version: 1}, se.Input)
			assert.Contains(t, err.Error(), `"`+name+`" v1`)
		})
	}
	_, err := c.Apply(nil, upcast.Raw{Type: "fails", Version: 1})
	require.ErrorIs(t, err, cause)
}

func TestApplyStopsAnUnvalidatedCycle(t *testing.T) {
	c := chainOf(t, upcast.Rename("a", 1, "b", 1), upcast.Rename("b", 1, "a", 1))
	_, err := c.Apply(nil, upcast.Raw{Type: "a", Version: 1})
	require.ErrorIs(t, err, upcast.ErrStepFailed)
	assert.Contains(t, err.Error(), "more than")
}

func TestApplyLimitsParts(t *testing.T) {
	c := chainOf(t, upcast.Split("a", 1, func(upcast.Raw) ([]upcast.Raw, error) {
		return make([]upcast.Raw, upcast.MaxParts+1), nil
	}))
	_, err := c.Apply(nil, upcast.Raw{Type: "a", Version: 1})
	require.ErrorIs(t, err, upcast.ErrStepFailed)

	// Width multiplies through nested splits: 40 x 40 parts.
	fan := func(next string) func(upcast.Raw) ([]upcast.Raw, error) {
		return func(upcast.Raw) ([]upcast.Raw, error) {
			parts := make([]upcast.Raw, 40)
			for i := range parts {
				parts[i] = upcast.Raw{Type: next, Version: 1}
			}
			return parts, nil
		}
	}
	c = chainOf(t, upcast.Split("x", 1, fan("y")), upcast.Split("y", 1, fan("z")))
	_, err = c.Apply(nil, upcast.Raw{Type: "x", Version: 1})
	require.ErrorIs(t, err, upcast.ErrStepFailed)
}

func TestStepsAccessors(t *testing.T) {
	c := chainOf(t, upcast.Drop("b", 1), upcast.Rename("a", 1, "b", 2))
	steps := c.Steps()
	require.Len(t, steps, 2)
	assert.Equal(t, upcast.KindRename, steps[0].Kind())
	assert.Equal(t, upcast.Key{Type: "a", Version: 1}, steps[0].From())
	assert.Equal(t, `rename "a" v1 -> "b" v2`, steps[0].String())
	assert.Equal(t, `drop "b" v1`, steps[1].String())
	assert.Equal(t, 2, c.Len())
	v, ok := c.NewestVersion("b")
	assert.True(t, ok)
	assert.Equal(t, uint32(1), v)
	_, ok = c.NewestVersion("z")
	assert.False(t, ok)
}
