package codec_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

func TestValidateReportsChainProblemsAndBlocksUse(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 4))
	require.NoError(t, codec.Register[OrderCancelled](reg, "order.cancelled", 1))
	require.NoError(t, reg.Upcast(
		upcast.Transform("order.placed", 1, func(r upcast.Raw) (upcast.Raw, error) { return r, nil }),
		upcast.Transform("order.placed", 3, func(r upcast.Raw) (upcast.Raw, error) { return r, nil }),
		upcast.Rename("a", 1, "b", 1),
		upcast.Rename("b", 1, "a", 1),
		upcast.Rename("order.voided", 1, "order.deleted", 1),
	))
	err := reg.Upcast(upcast.Drop("order.placed", 1))
	require.ErrorIs(t, err, upcast.ErrDuplicateStep)

	err = reg.Validate()
	require.ErrorIs(t, err, codec.ErrInvalidSetup)
	for _, want := range []error{upcast.ErrDuplicateStep, upcast.ErrGap, upcast.ErrCycle, upcast.ErrDeadEnd} {
		require.ErrorIs(t, err, want)
	}
	for _, want := range []string{`no step for v2 of "order.placed"`, `"order.deleted" v1`, `"a" v1 -> "b" v1 -> "a" v1`} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, err, reg.Validate(), "the result is kept")

	_, err = reg.Decode(stored(eventstore.EventData{Type: "order.cancelled", SchemaVersion: 1, Data: []byte(`{}`)}, "order-1", 0))
	require.ErrorIs(t, err, codec.ErrInvalidSetup, "a wrong set-up never decodes")
}

func TestDecodeRunsChainAndReportsStepFailures(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 2))
	require.NoError(t, codec.Register[OrderCancelled](reg, "order.cancelled", 1))
	require.NoError(t, reg.Upcast(
		upcast.TransformJSON("order.placed", 1, func(f map[string]json.RawMessage) error {
			if _, ok := f["seats"]; !ok {
				return errors.New("no seats")
			}
			return nil
		}),
		// Undeclared outputs: checked when read.
		upcast.Split("order.batch", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
			return []upcast.Raw{
				{Type: "order.placed", Version: 2, Data: []byte(`{"order_id":"b-1","seats":1}`)},
				{Type: string(r.Data), Version: 1, Data: []byte(`{"order_id":"b-1"}`)},
			}, nil
		}),
	))
	require.NoError(t, reg.Validate())

	got, err := reg.Decode(stored(eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{"order_id":"o","seats":2}`)}, "order-o", 4))
	require.NoError(t, err)
	assert.Equal(t, OrderPlaced{OrderID: "o", Seats: 2}, got[0].Value)
	assert.Equal(t, uint32(2), got[0].Event.SchemaVersion)

	_, err = reg.Decode(stored(eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{"order_id":"o"}`)}, "order-o", 5))
	require.ErrorIs(t, err, codec.ErrUpcastFailed)
	require.ErrorIs(t, err, upcast.ErrStepFailed)
	var de *codec.DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, uint32(1), de.SchemaVersion, "the stored version")
	assert.Contains(t, err.Error(), "no seats")

	batch := stored(eventstore.EventData{Type: "order.batch", SchemaVersion: 1, Data: []byte("order.cancelled")}, "order-b", 0)
	got, err = reg.Decode(batch)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, OrderCancelled{OrderID: "b-1"}, got[1].Value)

	// A part of an unknown type fails the whole stored event, naming the part.
	batch.Data = []byte("order.mystery")
	dst := []codec.Decoded{{Value: "earlier"}}
	out, err := reg.DecodeAppend(dst, batch)
	require.ErrorIs(t, err, codec.ErrUnknownType)
	assert.Contains(t, err.Error(), `part 1 of 2, upcast to "order.mystery" v1`)
	assert.Contains(t, err.Error(), `type "order.batch" v1`)
	assert.Equal(t, dst, out)

	// Above the newest step of a name that is not registered: too new.
	_, err = reg.Decode(stored(eventstore.EventData{Type: "order.batch", SchemaVersion: 2, Data: []byte(`{}`)}, "order-b", 1))
	require.ErrorIs(t, err, codec.ErrVersionTooNew)
	// Below the oldest: no path.
	_, err = reg.Decode(stored(eventstore.EventData{Type: "order.placed", SchemaVersion: 0, Data: []byte(`{}`)}, "order-b", 1))
	require.ErrorIs(t, err, codec.ErrNoUpcastPath)
}

func TestDroppedEventDecodesToNothing(t *testing.T) {
	reg := newRegistry(t)
	require.NoError(t, reg.Upcast(upcast.Drop("order.noted", 1)))
	got, err := reg.Decode(stored(eventstore.EventData{Type: "order.noted", SchemaVersion: 1, Data: []byte(`garbage`)}, "order-1", 0))
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestConcurrentFirstUseAndDecode(t *testing.T) {
	reg := v2Registry(t)
	old := v1Registry(t)
	data, err := old.Encode(v1OrderPlaced{OrderID: "o-1", Seats: []string{"A1"}})
	require.NoError(t, err)
	ev := stored(data, "order-o-1", 0)

	fresh := newRegistry(t) // not validated yet: the goroutines race to do it
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				got, err := reg.Decode(ev)
				if !assert.NoError(t, err) || !assert.Len(t, got, 2) {
					return
				}
				_, err = fresh.Encode(OrderPlaced{OrderID: "x"})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
}

func TestPartIDsAreStableAndDistinct(t *testing.T) {
	reg, old := v2Registry(t), v1Registry(t)
	data, err := old.Encode(v1OrderPlaced{OrderID: "o-1", Seats: []string{"A1"}})
	require.NoError(t, err)
	ev := stored(data, "order-o-1", 0)
	first, err := reg.Decode(ev)
	require.NoError(t, err)
	again, err := reg.Decode(ev)
	require.NoError(t, err)
	require.Len(t, first, 2)
	assert.NotEqual(t, first[0].PartID(), first[1].PartID())
	assert.Equal(t, first[0].PartID(), again[0].PartID(), "the same on every read")
	assert.Equal(t, first[1].PartID(), again[1].PartID(), "the same on every read")
	unsplit, err := old.Decode(ev)
	require.NoError(t, err)
	require.Len(t, unsplit, 1)
	assert.Equal(t, unsplit[0].PartID(), first[0].PartID(),
		"an event that starts being split keeps the PartID of its first value")

	other := ev
	other.ID = eventstore.NewEventID()
	fromOther, err := reg.Decode(other)
	require.NoError(t, err)
	assert.NotEqual(t, first[0].PartID(), fromOther[0].PartID())
	assert.NotEqual(t, first[1].PartID(), fromOther[1].PartID())
}

// Event IDs are unique per stream only: the same ID in two streams is two
// events, and every one of their parts needs its own PartID, part 0 too.
func TestPartIDsDifferAcrossStreams(t *testing.T) {
	reg, old := v2Registry(t), v1Registry(t)
	data, err := old.Encode(v1OrderPlaced{OrderID: "o-1", Seats: []string{"A1"}})
	require.NoError(t, err)
	a := stored(data, "order-o-1", 0)
	b := a
	b.StreamID = "order-o-2"
	fromA, err := reg.Decode(a)
	require.NoError(t, err)
	fromB, err := reg.Decode(b)
	require.NoError(t, err)
	require.Len(t, fromA, 2)
	require.Len(t, fromB, 2)
	for i := range fromA {
		assert.NotEqual(t, fromA[i].PartID(), fromB[i].PartID(), "part %d of one event ID in two streams", i)
	}
}

// TestReadsTellsARenameWithoutItsStep: a registry reads the names it
// registers and those its upcasters take, and says it does not read the
// old name of a type renamed without its Rename step (issue 23, item 12).
func TestReadsTellsARenameWithoutItsStep(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[OrderPlaced](reg, "orders.placed", 1))
	require.NoError(t, codec.Register[OrderCancelled](reg, "orders.cancelled", 1))
	require.NoError(t, reg.Upcast(upcast.Rename("order.cancelled", 1, "orders.cancelled", 1), upcast.Drop("order.audited", 1)))
	assert.True(t, reg.Reads("orders.placed", 1), "a registered name")
	assert.True(t, reg.Reads("order.cancelled", 1), "an old name with its Rename step")
	assert.True(t, reg.Reads("order.audited", 1), "a dropped type is read, into nothing")
	assert.True(t, reg.Reads("order.audited", 0), "at some version")
	assert.False(t, reg.Reads("order.audited", 2), "but not at a version no step covers")
	assert.False(t, reg.Reads("order.placed", 0), "an old name whose Rename step is missing")
	require.NoError(t, reg.Validate())
	assert.False(t, reg.Reads("order.placed", 1), "and after the registry is frozen")
	assert.True(t, reg.Reads("orders.placed", 1))
}

// TestRegisterErrorGivesARecordedErrorItsIdentity: issue 23, item 3. A
// registered domain error has a code that a wrapped error finds, and the
// error read back under the code matches it with errors.Is; set-up
// mistakes are refused and kept for Validate.
func TestRegisterErrorGivesARecordedErrorItsIdentity(t *testing.T) {
	declined, expired := errors.New("card declined"), errors.New("card expired")
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.RegisterError(reg, "payment.declined", declined))
	require.NoError(t, codec.RegisterError(reg, "payment.expired", expired))
	wrapped := fmt.Errorf("charging order 7: %w", expired)
	assert.Equal(t, "payment.expired", reg.ErrorCode(wrapped))
	assert.Empty(t, reg.ErrorCode(errors.New("another")))
	assert.Empty(t, reg.ErrorCode(nil))

	back := reg.ErrorOf("payment.expired", wrapped.Error())
	assert.ErrorIs(t, back, expired)
	assert.NotErrorIs(t, back, declined)
	assert.Equal(t, "charging order 7: card expired", back.Error())
	unknown := reg.ErrorOf("payment.stolen", "card stolen")
	assert.Nil(t, unknown.Err, "a code this code does not know: the text alone")
	assert.Equal(t, "card stolen", unknown.Error())

	for what, err := range map[string]error{
		"a code taken":    codec.RegisterError(reg, "payment.declined", errors.New("x")),
		"an error taken":  codec.RegisterError(reg, "payment.refused", declined),
		"an empty code":   codec.RegisterError(reg, "", errors.New("y")),
		"a reserved code": codec.RegisterError(reg, codec.ReservedPrefix+"z", errors.New("z")),
		"a nil error":     codec.RegisterError(reg, "payment.nil", nil),
	} {
		assert.ErrorIs(t, err, codec.ErrInvalidRegistration, what)
	}
	require.ErrorIs(t, reg.Validate(), codec.ErrInvalidSetup, "the refusals are kept")
	assert.ErrorIs(t, codec.RegisterError(reg, "payment.late", errors.New("late")), codec.ErrFrozen)
}

type limitError struct{ Over []string }

func (e limitError) Error() string { return fmt.Sprintf("over the limit: %v", e.Over) }

type boxedError struct{ Detail any }

func (e boxedError) Error() string { return fmt.Sprint("boxed: ", e.Detail) }

// TestRegisterErrorRefusesWhatErrorsIsCannotMatch: found by review. An
// error type that is not comparable was accepted and never matched, and a
// comparable one holding a slice made RegisterError panic; with two
// registered errors that both match, the less specific one was recorded.
func TestRegisterErrorRefusesWhatErrorsIsCannotMatch(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	assert.ErrorIs(t, codec.RegisterError(reg, "shop.limit", limitError{Over: []string{"a"}}), codec.ErrInvalidRegistration)
	assert.NotPanics(t, func() {
		assert.ErrorIs(t, codec.RegisterError(reg, "shop.boxed", boxedError{Detail: []int{1}}), codec.ErrInvalidRegistration)
	})
	require.NoError(t, codec.RegisterError(reg, "shop.plain", boxedError{Detail: "fine"}))
	assert.NotPanics(t, func() { assert.Empty(t, reg.ErrorCode(boxedError{Detail: []int{2}})) })

	payment := errors.New("payment failed")
	declined := fmt.Errorf("card declined: %w", payment)
	specific := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.RegisterError(specific, "pay.failed", payment))
	require.NoError(t, codec.RegisterError(specific, "pay.declined", declined))
	code := specific.ErrorCode(fmt.Errorf("order 7: %w", declined))
	assert.Equal(t, "pay.declined", code, "the most specific registered error")
	back := specific.ErrorOf(code, "order 7: card declined: payment failed")
	assert.ErrorIs(t, back, declined)
	assert.ErrorIs(t, back, payment)
	assert.Equal(t, "pay.failed", specific.ErrorCode(payment))

	// An error that wraps a registered one is an error of its own, not the
	// same one registered twice.
	base := fmt.Errorf("refused: %w", errors.New("no"))
	wrapping := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.RegisterError(wrapping, "pay.refused_again", fmt.Errorf("again: %w", base)))
	require.NoError(t, codec.RegisterError(wrapping, "pay.refused", base))
}
