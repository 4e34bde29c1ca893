package busrepo

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eventIDByTheBook is EventID as the library computes a UUIDv5: the
// definition the stored IDs were made with, which must never change.
func eventIDByTheBook(stream, commandID string, index int) uuid.UUID {
	name := stream + "\x00" + commandID + "\x00" + strconv.Itoa(index)
	return uuid.NewSHA1(eventIDSpace, []byte(name))
}

// TestEventIDIsStable pins one ID that stores hold, and checks EventID
// against the library's UUIDv5 on names short and long.
func TestEventIDIsStable(t *testing.T) {
	id := EventID("order-1", "cmd-1", 0)
	require.Equal(t, eventIDByTheBook("order-1", "cmd-1", 0), id)
	assert.Equal(t, "95f0eeb4-4a43-5202-bbdc-fc82528db809", id.String(), "the ID stored for this command since the first release")
	assert.Equal(t, uuid.Version(5), id.Version())
	long := strings.Repeat("x", 600)
	assert.Equal(t, eventIDByTheBook(long, long, 12345), EventID(long, long, 12345))
}

func FuzzEventIDIsTheLibrarys(f *testing.F) {
	f.Add("order-1", "cmd-1", 0)
	f.Add("", "", -1)
	f.Add(strings.Repeat("s", 300), "c", 1<<40)
	f.Fuzz(func(t *testing.T, stream, commandID string, index int) {
		require.Equal(t, eventIDByTheBook(stream, commandID, index), EventID(stream, commandID, index))
	})
}

func TestEventIDAllocatesNothing(t *testing.T) {
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = EventID("order-1", "cmd-1", 3) }))
}
