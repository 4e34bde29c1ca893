package codec_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/upcast"
)

// TestRegisterRefusesUnstorableKinds: types that no serializer stores, or
// that would make Encode ambiguous (a *T beside its T), are refused when
// they are registered, not at the first dispatch.
func TestRegisterRefusesUnstorableKinds(t *testing.T) {
	for what, register := range map[string]func(*codec.Registry) error{
		"pointer":              func(r *codec.Registry) error { return codec.Register[*OrderPlaced](r, "order.ptr", 1) },
		"pointer to interface": func(r *codec.Registry) error { return codec.Register[*error](r, "perr", 1) },
		"channel":              func(r *codec.Registry) error { return codec.Register[chan int](r, "ch", 1) },
		"function":             func(r *codec.Registry) error { return codec.Register[func()](r, "fn", 1) },
		"unsafe pointer":       func(r *codec.Registry) error { return codec.Register[unsafe.Pointer](r, "up", 1) },
	} {
		reg := codec.NewRegistry(codec.Options{})
		require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 1))
		err := register(reg)
		require.ErrorIs(t, err, codec.ErrInvalidRegistration, what)
		var re *codec.RegistrationError
		require.ErrorAs(t, err, &re, what)
		require.ErrorIs(t, reg.Validate(), codec.ErrInvalidSetup, "%s: the set-up stays refused", what)
	}
}

// TestEncodeNilPointer: a nil pointer to a registered type matches a
// sentinel, and still names the registered type.
func TestEncodeNilPointer(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 1))
	_, err := reg.Encode((*OrderPlaced)(nil))
	require.ErrorIs(t, err, codec.ErrNilValue)
	var ee *codec.EncodeError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, "order.placed", ee.Name)
	_, err = reg.Encode(nil)
	require.ErrorIs(t, err, codec.ErrNilValue)
	require.ErrorIs(t, err, codec.ErrUnregisteredType)
}

// TestUpcastStepNamesAreCheckedLikeRegisteredNames: a step whose names no
// store could hold is refused as the registration of that name would be.
func TestUpcastStepNamesAreCheckedLikeRegisteredNames(t *testing.T) {
	noop := func(r upcast.Raw) (upcast.Raw, error) { return r, nil }
	for what, step := range map[string]upcast.Step{
		"NUL in a rename's old name":   upcast.Rename("f\x00", 1, "order.placed", 2),
		"NUL in a rename's new name":   upcast.Rename("old", 1, "f\x00", 2),
		"invalid UTF-8 in a transform": upcast.Transform("f\xff", 1, noop),
		"newline in a drop":            upcast.Drop("a\nb", 1),
		"overlong name in a split":     upcast.Split(string(make([]byte, 300)), 1, func(upcast.Raw) ([]upcast.Raw, error) { return nil, nil }),
	} {
		reg := codec.NewRegistry(codec.Options{})
		require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 2))
		require.ErrorIs(t, reg.Upcast(step), upcast.ErrInvalidStep, what)
		require.ErrorIs(t, reg.Validate(), upcast.ErrInvalidStep, what)
	}
}
