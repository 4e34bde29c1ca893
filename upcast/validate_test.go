package upcast_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/upcast"
)

func registered(types map[string]uint32) upcast.Current {
	return func(name string) (uint32, bool) {
		v, ok := types[name]
		return v, ok
	}
}

func identity(r upcast.Raw) (upcast.Raw, error) { return r, nil }

func oneSplit(r upcast.Raw) ([]upcast.Raw, error) { return []upcast.Raw{r}, nil }

// chainErrors returns the *ChainErrors in err, in order.
func chainErrors(t *testing.T, err error) []*upcast.ChainError {
	t.Helper()
	var out []*upcast.ChainError
	var walk func(error)
	walk = func(err error) {
		if ce, ok := err.(*upcast.ChainError); ok {
			out = append(out, ce)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

func TestValidateAcceptsGoodChains(t *testing.T) {
	c := chainOf(t,
		upcast.Transform("order.placed", 1, identity),
		upcast.Split("order.placed", 2, oneSplit).Into(
			upcast.Key{Type: "order.placed", Version: 3}, upcast.Key{Type: "seats.requested", Version: 1}),
		upcast.Rename("order.payment_accepted", 1, "finance.payment_received", 1),
		upcast.Transform("finance.payment_received", 1, identity),
		upcast.Drop("order.noted", 1),
		upcast.Transform("legacy", 0, identity), // data written before versioning
		upcast.Split("undeclared", 1, oneSplit),
	)
	err := c.Validate(registered(map[string]uint32{
		"order.placed": 3, "seats.requested": 1, "finance.payment_received": 2, "legacy": 1,
	}))
	require.NoError(t, err)
}

func TestAddRejectsDuplicateAndMalformedSteps(t *testing.T) {
	var c upcast.Chain
	require.NoError(t, c.Add(upcast.Transform("a", 1, identity)))

	err := c.Add(
		upcast.Rename("a", 1, "b", 1),                   // duplicate
		upcast.Transform("", 1, identity),               // empty name
		upcast.Transform("a", 2, nil),                   // nil function
		upcast.Transform("a", ^uint32(0), identity),     // no next version
		upcast.Split("s", 1, nil),                       // nil function
		upcast.Rename("r", 1, "r", 1),                   // to itself
		upcast.Rename("r", 2, "", 1),                    // to empty name
		upcast.Drop("d", 1).Into(upcast.Key{Type: "x"}), // Into on a drop
		upcast.Split("s", 2, oneSplit).Into(upcast.Key{}),
		upcast.Step{}, // zero
		upcast.Drop("fine", 1),
	)
	errs := chainErrors(t, err)
	require.Len(t, errs, 10)
	require.ErrorIs(t, errs[0], upcast.ErrDuplicateStep)
	assert.Contains(t, errs[0].Error(), `"a" v1`)
	assert.Contains(t, errs[0].Error(), `transform "a" v1 -> "a" v2`, "names the step already there")
	for _, e := range errs[1:] {
		require.ErrorIs(t, e, upcast.ErrInvalidStep)
	}
	assert.True(t, c.Has(upcast.Key{Type: "fine", Version: 1}), "good steps are added")
	assert.False(t, c.Has(upcast.Key{Type: "r", Version: 1}))
	assert.Equal(t, 2, c.Len())
}

func TestValidateFindsGaps(t *testing.T) {
	// v1->v2 and v3->v4 but no v2->v3.
	c := chainOf(t, upcast.Transform("a", 1, identity), upcast.Transform("a", 3, identity))
	err := c.Validate(registered(map[string]uint32{"a": 4}))
	errs := chainErrors(t, err)
	require.Len(t, errs, 1)
	require.ErrorIs(t, err, upcast.ErrGap)
	assert.Equal(t, upcast.Key{Type: "a", Version: 2}, errs[0].Key)
	assert.Contains(t, err.Error(), `no step for v2 of "a": steps exist for v1, v3 and the current version is v4`)

	// A gap between the newest step and the current version, several versions long.
	c = chainOf(t, upcast.Drop("b", 1), upcast.Transform("b", 2, identity))
	err = c.Validate(registered(map[string]uint32{"b": 6}))
	require.ErrorIs(t, err, upcast.ErrGap)
	assert.Contains(t, err.Error(), `no step for v3 to v5 of "b"`)
	assert.Len(t, chainErrors(t, err), 1)

	// A rename into an old version of a registered type that has no steps.
	c = chainOf(t, upcast.Rename("old", 1, "new", 1))
	err = c.Validate(registered(map[string]uint32{"new": 2}))
	require.ErrorIs(t, err, upcast.ErrGap)
	assert.Contains(t, err.Error(), `leads to "new" v1, and no step brings v1 of "new" to the current v2`)
}

func TestValidateFindsDeadEnds(t *testing.T) {
	cases := map[string]struct {
		step upcast.Step
		want string
	}{
		"rename to unregistered type":    {upcast.Rename("a", 1, "nowhere", 1), `leads to "nowhere" v1, which is not a registered type`},
		"transform of unregistered type": {upcast.Transform("ghost", 1, identity), `leads to "ghost" v2`},
		"rename past current version":    {upcast.Rename("a", 1, "b", 9), `newer than the current version v2 of "b"`},
		"split into unregistered":        {upcast.Split("a", 1, oneSplit).Into(upcast.Key{Type: "b", Version: 2}, upcast.Key{Type: "c", Version: 1}), `"c" v1`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := chainOf(t, tc.step)
			err := c.Validate(registered(map[string]uint32{"b": 2}))
			require.ErrorIs(t, err, upcast.ErrDeadEnd)
			assert.Contains(t, err.Error(), tc.want)
			assert.Len(t, chainErrors(t, err), 1)
		})
	}
}

func TestValidateRejectsStepsFromCurrentOrNewerVersion(t *testing.T) {
	c := chainOf(t, upcast.Transform("a", 2, identity), upcast.Drop("b", 5))
	err := c.Validate(registered(map[string]uint32{"a": 2, "b": 3}))
	errs := chainErrors(t, err)
	require.Len(t, errs, 2, "%v", err)
	require.ErrorIs(t, errs[0], upcast.ErrInvalidStep)
	assert.Contains(t, errs[0].Error(), `v2, the current version of "a"`)
	assert.Contains(t, errs[1].Error(), "newer than the current version v3")
}

func TestValidateFindsRenameCycles(t *testing.T) {
	c := chainOf(t,
		upcast.Rename("a", 1, "b", 1),
		upcast.Rename("b", 1, "c", 4),
		upcast.Rename("c", 4, "a", 1),
		upcast.Rename("x", 1, "y", 1),
		upcast.Transform("y", 1, identity),
		upcast.Rename("y", 2, "x", 1),
	)
	err := c.Validate(registered(nil))
	require.ErrorIs(t, err, upcast.ErrCycle)
	var cycles []string
	for _, e := range chainErrors(t, err) {
		if errors.Is(e, upcast.ErrCycle) {
			cycles = append(cycles, e.Reason)
		}
	}
	assert.Equal(t, []string{
		`closes the cycle "a" v1 -> "b" v1 -> "c" v4 -> "a" v1`,
		`closes the cycle "x" v1 -> "y" v1 -> "y" v2 -> "x" v1`,
	}, cycles)
}

func TestValidateFindsCycleThroughSplit(t *testing.T) {
	c := chainOf(t,
		upcast.Split("a", 1, oneSplit).Into(upcast.Key{Type: "b", Version: 1}, upcast.Key{Type: "a", Version: 2}),
		upcast.Rename("a", 2, "a", 1),
	)
	err := c.Validate(registered(map[string]uint32{"b": 1}))
	require.ErrorIs(t, err, upcast.ErrCycle)
	assert.Contains(t, err.Error(), `"a" v1 -> "a" v2 -> "a" v1`)
}

func TestValidateDoesNotCallTheCurrentVersionAGap(t *testing.T) {
	c := chainOf(t, upcast.Transform("b", 1, identity), upcast.Transform("b", 2, identity), upcast.Drop("b", 5))
	err := c.Validate(registered(map[string]uint32{"b": 3}))
	errs := chainErrors(t, err)
	require.Len(t, errs, 1, "%v", err)
	require.ErrorIs(t, errs[0], upcast.ErrInvalidStep)
}
