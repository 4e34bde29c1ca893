package codec_test

import (
	"encoding/json"
	"strings"
	"testing"
)

type RVNode struct {
	Next *RVNode            `json:"n"`
	Kids []RVNode           `json:"k"`
	Raw  json.RawMessage    `json:"r"`
	Any  any                `json:"a"`
	Map  map[string]*RVNode `json:"m"`
}

// TestReviewS2DeepNesting: deeply nested input around encoding/json's
// 10,000 depth limit decodes (or fails) as encoding/json does, never panics.
func TestReviewS2DeepNesting(t *testing.T) {
	for _, depth := range []int{9999, 10000, 10001, 200000} {
		arr := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		var obj, raw, anyv, mapv strings.Builder
		for range depth {
			obj.WriteString(`{"n":`)
			raw.WriteString(`{"r":`)
			anyv.WriteString(`{"a":`)
			mapv.WriteString(`{"m":{"x":`)
		}
		obj.WriteString("null" + strings.Repeat("}", depth))
		raw.WriteString("null" + strings.Repeat("}", depth))
		anyv.WriteString("null" + strings.Repeat("}", depth))
		mapv.WriteString("null" + strings.Repeat("}}", depth))
		name := func(s string) string { return s + "/" + strings.TrimSpace(strings.Repeat(" ", 0)) + itoa(depth) }
		t.Run(name("arr-any"), rvDiff[any](arr))
		t.Run(name("arr-slice"), rvDiff[[]any](arr))
		t.Run(name("arr-node"), rvDiff[RVNode](arr))
		t.Run(name("ptr"), rvDiff[RVNode](obj.String()))
		t.Run(name("raw"), rvDiff[RVNode](raw.String()))
		t.Run(name("any"), rvDiff[RVNode](anyv.String()))
		t.Run(name("map"), rvDiff[RVNode](mapv.String()))
		t.Run(name("rawtop"), rvDiff[json.RawMessage](arr))
	}
}

func itoa(n int) string {
	b := []byte{}
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
