package codec_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

// TicketBooked is a typical event: about 300 bytes of JSON.
type TicketBooked struct {
	BookingID  string    `json:"booking_id"`
	CustomerID string    `json:"customer_id"`
	EventID    string    `json:"event_id"`
	Seats      []string  `json:"seats"`
	PriceCents int64     `json:"price_cents"`
	Currency   string    `json:"currency"`
	BookedAt   time.Time `json:"booked_at"`
	Channel    string    `json:"channel"`
	Notes      string    `json:"notes"`
}

var typicalBooking = TicketBooked{
	BookingID:  "bk-0193a1b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b",
	CustomerID: "cu-0193a1b2-0000-7000-8000-000000000042",
	EventID:    "ev-2026-traviata",
	Seats:      []string{"stalls-F-12", "stalls-F-13", "stalls-F-14"},
	PriceCents: 25650,
	Currency:   "EUR",
	BookedAt:   time.Date(2026, 11, 29, 15, 30, 0, 123456789, time.UTC),
	Channel:    "web",
	Notes:      "wheelchair, side door",
}

// benchRegistry registers TicketBooked at v4. Stored v1 events reach it
// through three steps: a rename, then two field-level JSON transforms. If
// byteSteps, the transforms only edit bytes, to show the chain's own cost.
func benchRegistry(b *testing.B, byteSteps bool) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(b, codec.Register[TicketBooked](reg, "booking.ticket_booked", 4))
	steps := []upcast.Step{upcast.Rename("booking.created", 1, "booking.ticket_booked", 2)}
	if byteSteps {
		steps = append(steps,
			upcast.Transform("booking.ticket_booked", 2, func(r upcast.Raw) (upcast.Raw, error) {
				r.Data = bytes.Replace(r.Data, []byte(`"cents"`), []byte(`"price_cents"`), 1)
				return r, nil
			}),
			upcast.Transform("booking.ticket_booked", 3, func(r upcast.Raw) (upcast.Raw, error) {
				r.Data = bytes.Replace(r.Data, []byte(`"via"`), []byte(`"channel"`), 1)
				return r, nil
			}))
	} else {
		steps = append(steps,
			upcast.TransformJSON("booking.ticket_booked", 2, func(f map[string]json.RawMessage) error {
				f["price_cents"] = f["cents"]
				delete(f, "cents")
				return nil
			}),
			upcast.TransformJSON("booking.ticket_booked", 3, func(f map[string]json.RawMessage) error {
				f["channel"] = f["via"]
				delete(f, "via")
				return nil
			}))
	}
	require.NoError(b, reg.Upcast(steps...))
	require.NoError(b, reg.Validate())
	return reg
}

func benchEvents(b *testing.B, reg *codec.Registry) (current, old eventstore.Event) {
	data, err := reg.Encode(typicalBooking)
	require.NoError(b, err)
	current = stored(data, "booking-1", 0)
	v1 := bytes.Replace(data.Data, []byte(`"price_cents"`), []byte(`"cents"`), 1)
	v1 = bytes.Replace(v1, []byte(`"channel"`), []byte(`"via"`), 1)
	old = stored(eventstore.EventData{Type: "booking.created", SchemaVersion: 1, Data: v1}, "booking-1", 0)
	return current, old
}

func BenchmarkDecode(b *testing.B) {
	for _, bc := range []struct {
		name      string
		byteSteps bool
		upcast    bool
	}{
		{"current", false, false},
		{"chain3-json", false, true},
		{"chain3-bytes", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			reg := benchRegistry(b, bc.byteSteps)
			current, old := benchEvents(b, reg)
			ev := current
			if bc.upcast {
				ev = old
			}
			got, err := reg.Decode(ev)
			require.NoError(b, err)
			require.Equal(b, typicalBooking, got[0].Value)
			b.SetBytes(int64(len(ev.Data)))
			b.ReportAllocs()
			b.ResetTimer()
			buf := make([]codec.Decoded, 0, 1)
			for range b.N {
				buf, err = reg.DecodeAppend(buf[:0], ev)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeJSONOnly is encoding/json alone on the same bytes: the
// floor that Decode at the current version adds its overhead to.
func BenchmarkDecodeJSONOnly(b *testing.B) {
	data, err := json.Marshal(typicalBooking)
	require.NoError(b, err)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var v TicketBooked
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	reg := benchRegistry(b, false)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := reg.Encode(typicalBooking); err != nil {
			b.Fatal(err)
		}
	}
}
