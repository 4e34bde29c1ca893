package codec_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cairn-es/cairn/codec"
)

// A registry on a nil *JSON: before the plain codec, every Encode failed
// ("serializer panicked: value method codec.JSON.Marshal called using nil
// *JSON pointer"), whatever the value. Now a plain value that needs no
// escaping encodes, and one that does still fails: the outcome depends on
// the value's strings. (Decoding never touched the serializer, before or
// after, so it works either way.)
func TestS11NilJSONPointerEncodesAsBefore(t *testing.T) {
	reg := s11gRegistry(t, (*codec.JSON)(nil))
	_, errPlain := reg.Encode(s11gEvent{I: 1})
	_, errEscaped := reg.Encode(s11gEvent{S: "<"})
	_, errOther := reg.Encode(s11gOther{})
	assert.Error(t, errEscaped, "as before")
	assert.Error(t, errOther, "as before")
	assert.Error(t, errPlain, "as before (parent aa109a0): a nil *JSON's Marshal panics, reported as an error")
	assert.Equal(t, errEscaped == nil, errPlain == nil, "two values of one type encode alike on one serializer")
}
