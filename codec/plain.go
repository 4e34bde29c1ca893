package codec

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/cairn-es/cairn/internal/plainjson"
)

// plainCodec encodes and decodes the values of one plain struct type, the
// kind most events are: booleans, integers, floats and strings, in structs
// (see plainCodecOf). It does so with encoding/json's outcome, in a few
// hundred bytes of code, where encoding/json and its successor run through
// tens of kilobytes: an aggregate's load decodes its events between two
// round trips to a database, which leave the processor's caches cold, and
// there most of a decoding's time went to fetching the code and tables of
// the general decoder again (a command on a 10-event aggregate on
// PostgreSQL spent ~11 µs on its first event, ~0.6 µs on each of the
// others).
//
// It takes only what it knows the outcome of: a value whose encoding
// needs no escaping, and a document written the way encoding/json writes
// one (no whitespace, member names as the fields name themselves, each
// once, no null, no escape in a string, numbers that fit). For anything
// else it answers false, and the general codec runs, from a zero value:
// what it does accept, encoding/json turns into the same value, and what
// it writes, encoding/json writes byte for byte (plain_test.go holds it to
// both, and fuzzes them).
type plainCodec struct {
	fields []plainField
}

// plainField is one field of a plain struct type.
type plainField struct {
	name string // as the JSON object names it
	// member is name's JSON member prefix, `"name":`.
	member    []byte
	offset    uintptr
	size      uintptr // of the value, which tells an int8 from an int64
	kind      reflect.Kind
	omitEmpty bool
	sub       *plainCodec // a struct field's own
}

// maxPlainFields bounds the fields of a plain struct type, so that a
// decoding tells a member named twice with a bit of one word.
const maxPlainFields = 64

// plainCodecOf returns the plain codec of type t, or nil when t is not a
// plain struct type: one whose round trip through encoding/json is exact
// (see exactJSON: no pointer, slice, map, interface or type with its own
// encoding; exported, not embedded fields with plain ASCII names that differ
// in more than case), that holds no array, at most maxPlainFields fields a
// struct, and no json tag option but omitempty.
func plainCodecOf(t reflect.Type) *plainCodec {
	if t.Kind() != reflect.Struct {
		return nil
	}
	if exact, _ := exactJSON(t); !exact {
		return nil
	}
	return compilePlain(t)
}

// compilePlain is plainCodecOf for a struct type whose round trip is
// exact.
func compilePlain(t reflect.Type) *plainCodec {
	if t.NumField() > maxPlainFields {
		return nil
	}
	c := &plainCodec{fields: make([]plainField, t.NumField())}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" {
			name = sf.Name
		}
		f := plainField{name: name, member: []byte(`"` + name + `":`), offset: sf.Offset, size: sf.Type.Size(), kind: sf.Type.Kind()}
		switch opts {
		case "":
		case "omitempty":
			f.omitEmpty = true
		default:
			return nil // ",string" writes numbers quoted; ",omitzero" asks IsZero
		}
		switch f.kind {
		case reflect.Struct:
			if f.sub = compilePlain(sf.Type); f.sub == nil {
				return nil
			}
			f.omitEmpty = false // encoding/json leaves out no struct for omitempty
		case reflect.Array:
			return nil
		}
		c.fields[i] = f
	}
	return c
}

// decode decodes data into the zero value at p, and reports whether it
// could. On false the value at p may be partly written: decode again from
// a zero value.
func (c *plainCodec) decode(data []byte, p unsafe.Pointer) bool {
	i, ok := c.object(data, 0, p)
	return ok && i == len(data)
}

// object decodes the object at data[i:] into the zero value at p, and
// returns where it ends.
func (c *plainCodec) object(data []byte, i int, p unsafe.Pointer) (int, bool) {
	if i >= len(data) || data[i] != '{' {
		return i, false
	}
	i++
	if i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	var seen uint64
	for k := 0; ; k++ {
		f, next, ok := c.member(data, i, k)
		if !ok || seen&(1<<f) != 0 {
			return i, false // a member encoding/json might match another way, or one named twice
		}
		seen |= 1 << f
		if i, ok = c.fields[f].decode(data, next, p); !ok || i >= len(data) {
			return i, false
		}
		switch data[i] {
		case '}':
			return i + 1, true
		case ',':
			i++
		default:
			return i, false
		}
	}
}

// member reads the member name at data[i:] and its colon, and returns the
// index of the field of that exact name (the field encoding/json picks for
// it first) and where the value starts. The k-th member is looked for at
// the k-th field first, the order encoding/json writes them in.
func (c *plainCodec) member(data []byte, i, k int) (field, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, i, false
	}
	end := i + 1
	for end < len(data) && data[end] != '"' {
		if data[end] == '\\' || data[end] < 0x20 || data[end] >= utf8.RuneSelf {
			return 0, i, false // no plain field's name is written so
		}
		end++
	}
	if end+1 >= len(data) || data[end+1] != ':' {
		return 0, i, false
	}
	name := data[i+1 : end]
	if k < len(c.fields) && string(name) == c.fields[k].name {
		return k, end + 2, true
	}
	for f := range c.fields {
		if string(name) == c.fields[f].name {
			return f, end + 2, true
		}
	}
	return 0, i, false
}

// decode decodes the value at data[i:] into the field of the zero struct
// at p, and returns where the value ends.
func (f *plainField) decode(data []byte, i int, p unsafe.Pointer) (int, bool) {
	at := unsafe.Add(p, f.offset)
	switch f.kind {
	case reflect.String:
		s, end, ok := plainjson.String(data, i)
		if ok {
			*(*string)(at) = s
		}
		return end, ok
	case reflect.Bool:
		switch {
		case len(data)-i >= 4 && string(data[i:i+4]) == "true":
			*(*bool)(at) = true
			return i + 4, true
		case len(data)-i >= 5 && string(data[i:i+5]) == "false":
			return i + 5, true
		}
		return i, false
	case reflect.Struct:
		return f.sub.object(data, i, at)
	case reflect.Float32, reflect.Float64:
		end := scanNumber(data, i)
		if end == i {
			return i, false
		}
		bits := 8 * int(f.size)
		v, err := strconv.ParseFloat(unsafe.String(&data[i], end-i), bits)
		if err != nil {
			return i, false // out of range: encoding/json refuses it
		}
		if bits == 32 {
			*(*float32)(at) = float32(v)
		} else {
			*(*float64)(at) = v
		}
		return end, true
	}
	return f.decodeInteger(data, i, at)
}

// decodeInteger decodes the integer at data[i:] into the integer field at
// at: digits, after a minus for a signed one, without a fraction or an
// exponent (which encoding/json refuses for an integer), in the field's
// range.
func (f *plainField) decodeInteger(data []byte, i int, at unsafe.Pointer) (int, bool) {
	signed := f.kind >= reflect.Int && f.kind <= reflect.Int64
	neg := signed && i < len(data) && data[i] == '-'
	start := i
	if neg {
		start++
	}
	var n uint64
	end := start
	for end < len(data) && data[end] >= '0' && data[end] <= '9' {
		d := uint64(data[end] - '0')
		if n > (math.MaxUint64-d)/10 {
			return i, false
		}
		n = n*10 + d
		end++
	}
	if end == start || data[start] == '0' && end-start > 1 {
		return i, false // no digit, or a leading zero, which JSON does not allow
	}
	bits := 8 * f.size
	if signed {
		limit := uint64(1)<<(bits-1) - 1 // the largest value
		if neg {
			limit++ // and the smallest's magnitude
		}
		if n > limit {
			return i, false
		}
		if neg {
			n = -n // two's complement, whose low bits are the field's
		}
	} else if bits < 64 && n > uint64(1)<<bits-1 {
		return i, false
	}
	f.setBits(at, n)
	return end, true
}

// scanNumber returns where the JSON number at data[i:] ends, or i when
// there is none: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(data []byte, i int) int {
	digits := func(j int) int {
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		return j
	}
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	switch {
	case j < len(data) && data[j] == '0':
		j++
	case j < len(data) && data[j] >= '1' && data[j] <= '9':
		j = digits(j)
	default:
		return i
	}
	if j < len(data) && data[j] == '.' {
		if k := digits(j + 1); k > j+1 {
			j = k
		} else {
			return i
		}
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		k := j + 1
		if k < len(data) && (data[k] == '+' || data[k] == '-') {
			k++
		}
		if e := digits(k); e > k {
			j = e
		} else {
			return i
		}
	}
	return j
}

// encode returns the encoding of the value at p, as encoding/json writes
// it, and true; or false for a value that encoding/json would escape
// something in, or refuse (a NaN or an infinite float).
func (c *plainCodec) encode(p unsafe.Pointer) ([]byte, bool) {
	return c.appendObject(make([]byte, 0, 64), p)
}

// appendObject appends the encoding of the struct at p to b.
func (c *plainCodec) appendObject(b []byte, p unsafe.Pointer) ([]byte, bool) {
	b = append(b, '{')
	first := true
	for k := range c.fields {
		f := &c.fields[k]
		at := unsafe.Add(p, f.offset)
		if f.omitEmpty && f.empty(at) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.member...)
		var ok bool
		if b, ok = f.appendValue(b, at); !ok {
			return nil, false
		}
	}
	return append(b, '}'), true
}

// empty reports whether the value at at is one that omitempty leaves out:
// false, 0 or "" (no plain field with omitempty is a float or a struct).
func (f *plainField) empty(at unsafe.Pointer) bool {
	switch f.kind {
	case reflect.Bool:
		return !*(*bool)(at)
	case reflect.String:
		return len(*(*string)(at)) == 0
	}
	return f.bits(at) == 0
}

// bits returns the integer field at at, zero-extended to 64 bits.
func (f *plainField) bits(at unsafe.Pointer) uint64 {
	switch f.size {
	case 1:
		return uint64(*(*uint8)(at))
	case 2:
		return uint64(*(*uint16)(at))
	case 4:
		return uint64(*(*uint32)(at))
	}
	return *(*uint64)(at)
}

// setBits stores the low bits of n in the integer field at at.
func (f *plainField) setBits(at unsafe.Pointer, n uint64) {
	switch f.size {
	case 1:
		*(*uint8)(at) = uint8(n)
	case 2:
		*(*uint16)(at) = uint16(n)
	case 4:
		*(*uint32)(at) = uint32(n)
	default:
		*(*uint64)(at) = n
	}
}

// appendValue appends the encoding of the field's value at at to b.
func (f *plainField) appendValue(b []byte, at unsafe.Pointer) ([]byte, bool) {
	switch f.kind {
	case reflect.String:
		return plainjson.AppendString(b, *(*string)(at))
	case reflect.Bool:
		return strconv.AppendBool(b, *(*bool)(at)), true
	case reflect.Struct:
		return f.sub.appendObject(b, at)
	case reflect.Float32:
		return appendFloat(b, float64(*(*float32)(at)), 32)
	case reflect.Float64:
		return appendFloat(b, *(*float64)(at), 64)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v := f.bits(at)
		shift := 64 - 8*f.size // sign-extends the field's bits
		return strconv.AppendInt(b, int64(v<<shift)>>shift, 10), true
	}
	return strconv.AppendUint(b, f.bits(at), 10), true
}

// appendFloat appends f as encoding/json writes a float of bits: the
// shortest decimal that reads back as f, in exponent form only for a
// magnitude below 1e-6 or from 1e21 on, with a one-digit negative
// exponent written so (1e-7, not 1e-07).
func appendFloat(b []byte, f float64, bits int) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, false // encoding/json refuses them
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, true
}
