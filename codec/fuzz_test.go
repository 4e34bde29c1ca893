package codec_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

// Fuzz targets: go test -run='^$' -fuzz='^FuzzDecode$' -fuzztime=60s ./codec/
// Seeds live in testdata/fuzz/<target>/ and in the f.Add calls.

// Customer is stored as "customer.registered" v1 by old code and read as
// "crm.customer_registered" v1 by new code, unchanged but for the name.
type Customer struct {
	ID    string   `json:"id"`
	Name  string   `json:"name"`
	Email string   `json:"email"`
	Tags  []string `json:"tags"`
}

// fuzzRegistry knows every type and every kind of step.
func fuzzRegistry(t testing.TB) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	registerV2(t, reg)
	require.NoError(t, codec.Register[Customer](reg, "crm.customer_registered", 1))
	require.NoError(t, codec.Register[Kitchen](reg, "test.kitchen", 1))
	require.NoError(t, reg.Upcast(
		upcast.Rename("customer.registered", 1, "crm.customer_registered", 1),
		upcast.Drop("order.noted", 1),
	))
	require.NoError(t, reg.Validate())
	return reg
}

var readSentinels = []error{codec.ErrUnknownType, codec.ErrVersionTooNew, codec.ErrNoUpcastPath, codec.ErrUndecodable, codec.ErrUpcastFailed}

// requireTypedError checks that a decode error says what failed and where.
func requireTypedError(t *testing.T, err error, ev eventstore.Event, allowed ...error) {
	t.Helper()
	var de *codec.DecodeError
	require.ErrorAs(t, err, &de)
	require.Equal(t, ev.StreamID, de.Stream)
	require.Equal(t, ev.Version, de.Version)
	require.Equal(t, ev.Type, de.Type)
	require.Equal(t, ev.SchemaVersion, de.SchemaVersion)
	if len(allowed) == 0 {
		allowed = readSentinels
	}
	for _, s := range allowed {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("error matches none of %v: %v", allowed, err)
}

// requireStable checks decode(encode(x)) == x for decoded values, through
// their bytes: encoding a decoded value and decoding it again changes
// nothing.
func requireStable(t *testing.T, reg *codec.Registry, values []codec.Decoded) {
	t.Helper()
	for _, d := range values {
		first, err := reg.Encode(d.Value)
		require.NoError(t, err, "a decoded %T must encode again", d.Value)
		again, err := reg.Decode(stored(first, "fuzz-1", 0))
		require.NoError(t, err)
		require.Len(t, again, 1)
		second, err := reg.Encode(again[0].Value)
		require.NoError(t, err)
		require.Equal(t, string(first.Data), string(second.Data))
	}
}

func FuzzDecode(f *testing.F) {
	reg := fuzzRegistry(f)
	f.Add("order.placed", uint32(1), []byte(`{"order_id":"o","customer":"c","seats":["A1"],"placed_at":"2026-01-01T00:00:00Z"}`))
	f.Add("order.placed", uint32(2), []byte(`{"order_id":"o"}`))
	f.Add("order.payment_accepted", uint32(1), []byte(`{"amount":"1.5 EUR"}`))
	f.Add("finance.payment_received", uint32(2), []byte(`{"amount_cents":-1}`))
	f.Add("customer.registered", uint32(1), []byte(`{"tags":null}`))
	f.Add("order.noted", uint32(1), []byte(`x`))
	f.Add("test.kitchen", uint32(1), []byte(`{"huge":1e3,"big_string":"12","by_number":{"01":"a"},"raw":[ 1 ]}`))
	f.Add("nope", uint32(0), []byte{})
	f.Fuzz(func(t *testing.T, typ string, version uint32, data []byte) {
		ev := stored(eventstore.EventData{Type: typ, SchemaVersion: version, Data: data}, "fuzz-1", 3)
		got, err := reg.Decode(ev)
		if err != nil {
			requireTypedError(t, err, ev)
			require.Empty(t, got)
			return
		}
		for i, d := range got {
			require.Equal(t, i, d.Index)
			require.Equal(t, len(got), d.Count)
			require.Equal(t, ev.Version, d.Event.Version)
			require.Equal(t, ev.Position, d.Event.Position)
		}
		requireStable(t, reg, got)
	})
}

// validUTF8 stands for what JSON can carry: encoding/json replaces invalid
// UTF-8 in strings with U+FFFD, so binary data belongs in []byte fields.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func FuzzRoundTrip(f *testing.F) {
	reg := fuzzRegistry(f)
	f.Add("ada", int64(-1), 0.5, []byte{0, 1}, int64(0), "tag", "key", uint64(math.MaxUint64))
	f.Add("", int64(math.MinInt64), math.SmallestNonzeroFloat64, []byte(nil), int64(math.MaxInt64), "\u2028", "", uint64(0))
	f.Fuzz(func(t *testing.T, name string, count int64, ratio float64, blob []byte, nanos int64, tag, key string, unsigned uint64) {
		name, tag, key = validUTF8(name), validUTF8(tag), validUTF8(key)
		v := Kitchen{
			Audit: Audit{By: name}, At: time.Unix(0, nanos).UTC(), Name: name, Count: int(count),
			Unsigned: unsigned, Ratio: ratio, BigString: count, Decimal: fmt.Sprint(unsigned),
			Home: Address{Street: key, Lines: []string{tag}}, Tags: []string{tag, name},
			Scores: map[string]int{key: int(count)}, ByNumber: map[int]string{int(count): tag},
			Blob: blob, Raw: []byte(`null`),
		}
		data, err := reg.Encode(v)
		if math.IsNaN(ratio) || math.IsInf(ratio, 0) {
			var ee *codec.EncodeError
			require.ErrorAs(t, err, &ee, "JSON has no NaN or infinity")
			return
		}
		require.NoError(t, err)
		got, err := reg.Decode(stored(data, "kitchen-1", 0))
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, v, got[0].Value)
	})
}

func FuzzTransform(f *testing.F) {
	reg, old := fuzzRegistry(f), v1Registry(f)
	f.Add("o-1", "pay-1", "EUR", uint32(12), uint8(50), []byte(`{"amount":"1 EUR"}`))
	f.Add("", "", "", uint32(0), uint8(0), []byte(`{"amount":"1.2.3 X"}`))
	f.Add("o", "r", "US D", uint32(math.MaxUint32), uint8(99), []byte(`{"amount":"9999999999999999999.99 EUR"}`))
	f.Fuzz(func(t *testing.T, orderID, reference, currency string, units uint32, cents uint8, garbage []byte) {
		orderID, reference, currency = validUTF8(orderID), validUTF8(reference), validUTF8(currency)
		cents %= 100
		data, err := old.Encode(v1PaymentAccepted{OrderID: orderID, Reference: reference,
			Amount: fmt.Sprintf("%d.%02d %s", units, cents, currency)})
		require.NoError(t, err)
		got, err := reg.Decode(stored(data, "order-1", 1))
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, PaymentReceived{OrderID: orderID, Reference: reference, Currency: currency,
			AmountCents: int64(units)*100 + int64(cents)}, got[0].Value)

		ev := stored(eventstore.EventData{Type: "order.payment_accepted", SchemaVersion: 1, Data: garbage}, "order-1", 2)
		got, err = reg.Decode(ev)
		if err != nil {
			requireTypedError(t, err, ev, codec.ErrUpcastFailed, codec.ErrUndecodable)
			return
		}
		requireStable(t, reg, got)
	})
}

func FuzzRename(f *testing.F) {
	reg := fuzzRegistry(f)
	old := codec.NewRegistry(codec.Options{})
	require.NoError(f, codec.Register[Customer](old, "customer.registered", 1))
	f.Add("c-1", "Ada", "ada@example.com", "vip", []byte(`{"id":1}`))
	f.Add("", "", "", "", []byte(`null`))
	f.Fuzz(func(t *testing.T, id, name, email, tag string, garbage []byte) {
		v := Customer{ID: validUTF8(id), Name: validUTF8(name), Email: validUTF8(email)}
		if tag != "" {
			v.Tags = []string{validUTF8(tag)}
		}
		data, err := old.Encode(v)
		require.NoError(t, err)
		got, err := reg.Decode(stored(data, "customer-1", 0))
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, v, got[0].Value)
		require.Equal(t, "crm.customer_registered", got[0].Event.Type)
		require.Equal(t, data.Data, got[0].Event.Data, "a rename keeps the bytes")

		ev := stored(eventstore.EventData{Type: "customer.registered", SchemaVersion: 1, Data: garbage}, "customer-1", 1)
		got, err = reg.Decode(ev)
		if err != nil {
			requireTypedError(t, err, ev, codec.ErrUndecodable)
			return
		}
		requireStable(t, reg, got)
	})
}

func FuzzSplit(f *testing.F) {
	reg, old := fuzzRegistry(f), v1Registry(f)
	f.Add("o-1", "ada", "A1,A2", int64(0), []byte(`{"seats":7}`))
	f.Add("", "", "", int64(-1), []byte(`[]`))
	f.Fuzz(func(t *testing.T, orderID, customer, seats string, nanos int64, garbage []byte) {
		v := v1OrderPlaced{OrderID: validUTF8(orderID), Customer: validUTF8(customer), PlacedAt: time.Unix(0, nanos).UTC()}
		if seats != "" {
			v.Seats = strings.Split(validUTF8(seats), ",")
		}
		data, err := old.Encode(v)
		require.NoError(t, err)
		ev := stored(data, "order-1", 0)
		got, err := reg.Decode(ev)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, OrderPlacedV2{OrderID: v.OrderID, Customer: v.Customer, PlacedAt: v.PlacedAt}, got[0].Value)
		require.Equal(t, SeatsRequested{OrderID: v.OrderID, Seats: v.Seats}, got[1].Value)
		for i, d := range got {
			require.Equal(t, ev.Position, d.Event.Position)
			require.Equal(t, ev.ID, d.Event.ID)
			require.Equal(t, i, d.Index)
		}

		ev = stored(eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: garbage}, "order-1", 1)
		got, err = reg.Decode(ev)
		if err != nil {
			requireTypedError(t, err, ev, codec.ErrUpcastFailed, codec.ErrUndecodable)
			return
		}
		require.Len(t, got, 2)
		requireStable(t, reg, got)
	})
}

func FuzzDrop(f *testing.F) {
	reg := fuzzRegistry(f)
	f.Add(uint32(1), []byte(`{}`))
	f.Add(uint32(0), []byte(`{`))
	f.Add(uint32(2), []byte(nil))
	f.Fuzz(func(t *testing.T, version uint32, data []byte) {
		ev := stored(eventstore.EventData{Type: "order.noted", SchemaVersion: version, Data: data}, "order-1", 5)
		got, err := reg.Decode(ev)
		switch {
		case version == 1:
			require.NoError(t, err, "a dropped event never fails, whatever its data")
			require.Empty(t, got)
		case version == 0:
			requireTypedError(t, err, ev, codec.ErrNoUpcastPath)
		default:
			requireTypedError(t, err, ev, codec.ErrVersionTooNew)
		}
	})
}
