package saga

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// decodeOutline must read every record as decodeRecord does, less the
// payloads' data: refuse the same records with the same error, and give
// the same fields. These tests hold it to that on random records, whole
// and damaged, and on the version 1 records of testdata/v1.

// outlinesLikeRecord requires decodeOutline to read ev as decodeRecord
// does, less the payloads' data of a version 2 record, and returns whether
// decodeRecord reads it.
func outlinesLikeRecord(t *testing.T, ev eventstore.Event) bool {
	t.Helper()
	full, fullErr := decodeRecord(ev)
	got, gotErr := decodeOutline(ev)
	if fullErr != nil {
		require.Error(t, gotErr, "decodeRecord refuses %s, decodeOutline reads it", ev.Data)
		require.Equal(t, fullErr.Error(), gotErr.Error(), "the errors of %s", ev.Data)
		return false
	}
	require.NoError(t, gotErr, "decodeRecord reads %s", ev.Data)
	if ev.SchemaVersion == recordVersion {
		full = withoutPayloads(full)
	}
	require.Equal(t, full, got, "the outline of %s", ev.Data)
	return true
}

// withoutPayloads returns rec without the data of its state, its
// messages' events and its deadlines' payloads: what decodeOutline
// should read of it.
func withoutPayloads(rec *record) *record {
	out := *rec
	out.State.Data = nil
	out.Handled.Message = eventWithoutData(out.Handled.Message)
	if rec.Held != nil {
		out.Held = make([]envelope, len(rec.Held))
		for i, h := range rec.Held {
			out.Held[i] = eventWithoutData(h)
		}
	}
	if rec.Parked != nil {
		p := *rec.Parked
		p.Message = eventWithoutData(p.Message)
		out.Parked = &p
	}
	if rec.Deadlines != nil {
		out.Deadlines = make([]deadline, len(rec.Deadlines))
		for i, d := range rec.Deadlines {
			d.Payload.Data = nil
			out.Deadlines[i] = d
		}
	}
	return &out
}

// eventWithoutData returns m without its event's data.
func eventWithoutData(m envelope) envelope {
	if m.Event != nil {
		ev := *m.Event
		ev.Data = nil
		m.Event = &ev
	}
	return m
}

// TestOutlineReadsRandomRecordsLikeDecodeRecord encodes random records,
// then damages them the ways stored data goes bad and the ways a light
// reading could miss (a payload that is not base64, a value of the wrong
// type, a key twice or in other case), and decodes each both ways (fixed
// seed).
func TestOutlineReadsRandomRecordsLikeDecodeRecord(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	n := 1000
	if testing.Short() {
		n = 100
	}
	r := rand.New(rand.NewPCG(20, 26))
	read, refused := 0, 0
	for i := range n {
		ev := encodedRecord(t, r, uint64(i))
		require.True(t, outlinesLikeRecord(t, ev), "an encoded record reads")
		for range 8 {
			damaged := ev
			damaged.Data = damage(t, r, ev.Data)
			if outlinesLikeRecord(t, damaged) {
				read++
			} else {
				refused++
			}
		}
	}
	// Both kinds of damage occur, or the test would hold little.
	assert.Greater(t, read, n, "damaged records that still read")
	assert.Greater(t, refused, n, "damaged records refused")
}

// TestOutlineRefusesWhatDecodeRecordRefuses: a payload that is not
// base64, or not a string, anywhere in a record; another event type; an
// unknown schema version.
func TestOutlineRefusesWhatDecodeRecordRefuses(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 27))
	ev := encodedRecord(t, r, 7)
	for _, bad := range []string{`"AQ!="`, `"A==="`, `"AQ"`, `123`, `[256]`, `{}`, `true`} {
		for _, at := range []string{`"state":{`, `"event":{`, `"payload":{`, `"command":{`} {
			data := string(ev.Data)
			i := strings.Index(data, at)
			if i < 0 {
				continue
			}
			j := strings.Index(data[i:], `"data":`) + i + len(`"data":`)
			end := strings.IndexAny(data[j:], ",}") + j
			if data[j] == '[' {
				end = strings.Index(data[j:], "]") + j + 1
			}
			damaged := ev
			damaged.Data = []byte(data[:j] + bad + data[end:])
			assert.False(t, outlinesLikeRecord(t, damaged), "%s in %s", bad, at)
		}
	}
	foreign := ev
	foreign.Type = "someone.elses"
	assert.False(t, outlinesLikeRecord(t, foreign))
	future := ev
	future.SchemaVersion = recordVersion + 1
	assert.False(t, outlinesLikeRecord(t, future))
}

// TestOutlineReadsVersion1Records: the records of testdata/v1, which
// decodeRecord upgrades, read the same way (whole).
func TestOutlineReadsVersion1Records(t *testing.T) {
	files, err := filepath.Glob("testdata/v1/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	records := 0
	for _, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		lines := bufio.NewScanner(f)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var ev eventstore.Event
			require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
			if ev.Type != recordType {
				continue
			}
			require.EqualValues(t, 1, ev.SchemaVersion)
			require.True(t, outlinesLikeRecord(t, ev), "%s: %s", name, ev.Data)
			records++
		}
		require.NoError(t, lines.Err())
		require.NoError(t, f.Close())
	}
	assert.Positive(t, records)
}

// TestOutlineKeepsNoPayload: the outline of a record with large payloads
// keeps their types and versions and none of their bytes, and does not
// decode them on the way (what makes it cheaper than decodeRecord).
func TestOutlineKeepsNoPayload(t *testing.T) {
	big := bytes.Repeat([]byte("payload!"), 1<<14) // 128 KiB
	payload := raw{Type: "big", Version: 3, Data: big}
	rec := &record{
		Handled:   cause{Kind: kindHeld, Message: envelope{Source: "s", Sequence: 2, Event: &payload}},
		State:     payload,
		Held:      []envelope{{Source: "s", Sequence: 2, Event: &payload}},
		Parked:    &parkedMessage{Message: envelope{Source: "t", Sequence: 1, Event: &payload}},
		Commands:  []sentCommand{{ID: "c", Command: raw{Type: "cmd", Version: 1, Data: []byte(`{"n":1}`)}}},
		Deadlines: []deadline{{ID: "d", Name: "n", At: time.Unix(1, 0).UTC(), Payload: payload}},
	}
	ed, err := encodeRecord("saga:x-1", 4, "e/s/2", rec, eventstore.Metadata{})
	require.NoError(t, err)
	ev := eventstore.Event{EventData: ed, StreamID: "saga:x-1", Version: 4}

	got, err := decodeOutline(ev)
	require.NoError(t, err)
	for _, r := range []raw{got.State, *got.Handled.Message.Event, *got.Held[0].Event, *got.Parked.Message.Event, got.Deadlines[0].Payload} {
		assert.Equal(t, raw{Type: "big", Version: 3}, r)
	}
	assert.Equal(t, rec.Commands, got.Commands, "commands are kept whole")

	allocated := func(decode func(eventstore.Event) (*record, error)) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 3 {
			_, err := decode(ev)
			require.NoError(t, err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	whole, outlined := allocated(decodeRecord), allocated(decodeOutline)
	assert.Greater(t, whole, uint64(3*5*len(big)), "decodeRecord decodes the five payloads")
	assert.Less(t, outlined, uint64(len(big)), "decodeOutline decodes none of them")
}

// encodedRecord returns a random step record, as encodeRecord stores it.
func encodedRecord(t *testing.T, r *rand.Rand, version uint64) eventstore.Event {
	t.Helper()
	rec := &record{
		Handled:     cause{Kind: pick(r, kindEvent, kindDeadline, kindRejected, kindHeld, kindParked, kindRedriven), Message: randomEnvelope(r), At: randomTime(r)},
		Sources:     map[string]progress{},
		Completed:   r.IntN(4) == 0,
		CompletedAt: r.Uint64N(5),
		Duplicates:  r.Uint64N(3),
	}
	if r.IntN(5) > 0 {
		rec.State = randomRaw(r)
	}
	for range r.IntN(3) {
		rec.Sources[pick(r, "orders", "payments", "tab-1")] = progress{Next: r.Uint64N(9), Above: []uint64{10, 12}[:r.IntN(3)], Pending: r.IntN(2) == 0, HeldTo: r.Uint64N(12)}
	}
	for range r.IntN(4) {
		rec.Held = append(rec.Held, randomEnvelope(r))
	}
	if r.IntN(3) == 0 {
		rec.Parked = &parkedMessage{Message: randomEnvelope(r), Error: "it failed", Attempts: r.IntN(4), Since: randomTime(r)}
	}
	for i := range r.IntN(3) {
		rec.Commands = append(rec.Commands, sentCommand{ID: fmt.Sprintf("cmd-%d", i), Command: randomRaw(r)})
	}
	for i := range r.IntN(3) {
		rec.Deadlines = append(rec.Deadlines, deadline{ID: fmt.Sprintf("dl-%d", i), Name: pick(r, "expire", "remind"), At: randomTime(r), Payload: randomRaw(r), Trace: pick(r, "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")})
	}
	if r.IntN(3) == 0 {
		rec.Settled = settled{Commands: []settledCommand{{ID: "cmd-0", Sent: 1}}, Below: r.Uint64N(3)}
	}
	if r.IntN(4) == 0 {
		rec.Redrive = &redriveMark{Step: 5, From: 2, Messages: 3}
	}
	ed, err := encodeRecord("saga:x-1", version, "e/orders/1", rec, eventstore.Metadata{})
	require.NoError(t, err)
	return eventstore.Event{EventData: ed, StreamID: "saga:x-1", Version: version}
}

func randomEnvelope(r *rand.Rand) envelope {
	m := envelope{Kind: pick(r, "", kindRejected, kindCommand), Source: pick(r, "", "orders", "tab-1"), Sequence: r.Uint64N(20),
		Ordered: r.IntN(2) == 0, Type: pick(r, "", "order.placed", "tab.opened"), Deadline: pick(r, "", "dl-1"),
		Command: pick(r, "", "cmd-1"), Sent: r.Uint64N(4), Reason: pick(r, "", "no stock"), ReasonCode: pick(r, "", "stock"), Since: randomTime(r)}
	if r.IntN(2) == 0 {
		m.EventID = uuid.UUID{byte(r.Uint32()), 1, 2, 3}
		m.Position = eventstore.Position{Major: r.Uint64N(99), Minor: r.Uint64N(3)}
	}
	if r.IntN(2) == 0 {
		ev := randomRaw(r)
		m.Event = &ev
		m.Metadata = &eventstore.Metadata{CorrelationID: "corr", CausationID: pick(r, "", "cause"), Extra: map[string]string{"k": "v"}}
	}
	return m
}

func randomRaw(r *rand.Rand) raw {
	data := make([]byte, r.IntN(64))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if r.IntN(8) == 0 {
		data = nil // written as null
	}
	return raw{Type: pick(r, "order.placed", "tab.state", "tab.notify"), Version: uint32(r.IntN(3)), Data: data}
}

func randomTime(r *rand.Rand) time.Time {
	if r.IntN(4) == 0 {
		return time.Time{}
	}
	return time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(48 * time.Hour))))
}

func pick[T any](r *rand.Rand, of ...T) T { return of[r.IntN(len(of))] }

// damagedValues are what damage puts in place of a value: whatever a
// field may meet, base64 good and bad most of all.
var damagedValues = []string{
	`null`, `0`, `1`, `-1`, `1.5`, `18446744073709551616`, `true`, `""`, `"x"`, `[]`, `{}`, `[1,2]`, `[256]`, `["a"]`,
	`"AQID"`, `"AQ=="`, `"AQ"`, `"AQ="`, `"A==="`, `"AQ!="`, `"AQ\n=="`, `"AQ\r\n=="`, `"A\/Q="`, `"AQ=\u003d"`, `"-_8="`, "\"AQ\xff=\"",
	`"2026-01-02T03:04:05Z"`, `"2026-01-02 03:04:05Z"`, `"0193a1b2-0000-7000-8000-000000000001"`, `"12:34"`, `"1:x"`,
	`{"type":"t","v":1,"data":"AQ=="}`, `{"type":"t","data":"AQ!="}`, `{"data":[1,2]}`, `{"data":{}}`,
}

// damage returns doc damaged one way: a value replaced, a key repeated
// with another value, a key in other case, or bytes cut or changed.
func damage(t *testing.T, r *rand.Rand, doc []byte) []byte {
	t.Helper()
	s := string(doc)
	keys := keyOffsets(s)
	switch r.IntN(6) {
	case 0, 1: // a payload's data, or any value, replaced
		k := keys[r.IntN(len(keys))]
		if datas := dataKeys(s, keys); len(datas) > 0 && r.IntN(2) == 0 {
			k = datas[r.IntN(len(datas))]
		}
		end := valueEnd(t, s, k.value)
		return []byte(s[:k.value] + pick(r, damagedValues...) + s[end:])
	case 2: // a key twice: the damaged value first, or last
		k := keys[r.IntN(len(keys))]
		member := s[k.key:k.value] + pick(r, damagedValues...)
		if r.IntN(2) == 0 {
			return []byte(s[:k.key] + member + "," + s[k.key:])
		}
		end := valueEnd(t, s, k.value)
		return []byte(s[:end] + "," + member + s[end:])
	case 3: // a key in upper case, which encoding/json matches all the same
		k := keys[r.IntN(len(keys))]
		return []byte(s[:k.key] + strings.ToUpper(s[k.key:k.value]) + s[k.value:])
	case 4: // a byte changed
		b := []byte(s)
		b[r.IntN(len(b))] = pick(r, byte('!'), '=', '"', '0', 'A', '\\', 0xff)
		return b
	}
	return []byte(s[:r.IntN(len(s))]) // cut short
}

// member is where a key starts in a document, and where its value does.
type member struct{ key, value int }

// keyOffsets returns the members of doc, a document as encoding/json
// writes it (no spaces), at any depth.
func keyOffsets(doc string) []member {
	var out []member
	inString := false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			if !inString && i > 0 && (doc[i-1] == '{' || doc[i-1] == ',') {
				end := strings.IndexByte(doc[i+1:], '"') + i + 1
				if end+1 < len(doc) && doc[end+1] == ':' {
					out = append(out, member{key: i, value: end + 2})
				}
			}
			inString = !inString
		}
	}
	return out
}

// dataKeys returns the members of keys that are a payload's data.
func dataKeys(doc string, keys []member) []member {
	var out []member
	for _, k := range keys {
		if doc[k.key:k.value] == `"data":` {
			out = append(out, k)
		}
	}
	return out
}

// valueEnd returns where the value that starts at i in doc ends.
func valueEnd(t *testing.T, doc string, i int) int {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc[i:]))
	var v json.RawMessage
	require.NoError(t, dec.Decode(&v), "a value at %d of %s", i, doc)
	return i + int(dec.InputOffset())
}
