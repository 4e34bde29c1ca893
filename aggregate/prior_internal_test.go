package aggregate

import (
	"context"
	"fmt"
	"hash/maphash"
	"iter"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

type note struct{ n int }

type noted struct {
	N int `json:"n"`
}

func (a *note) noted(e noted) { a.n += e.N }

// noteSetup returns a memory store, closed when the test ends, and the
// note type with its codec.
func noteSetup(t *testing.T) (*memory.Store, *codec.Registry, *Type[note, *note]) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[noted](reg, "note.noted", 1))
	typ, err := NewType[note]("note", Options[note]{}, Applies((*note).noted))
	require.NoError(t, err)
	return mem, reg, typ
}

// TestPriorOutcomeSurvivesHashCollisions plants the hash of one command ID
// on the version of another's events, as a collision would, and hides the
// store's command index: the answer must still be right, found by a scan.
func TestPriorOutcomeSurvivesHashCollisions(t *testing.T) {
	ctx := context.Background()
	mem, reg, typ := noteSetup(t)
	repo, err := NewRepository(struct{ eventstore.Store }{mem}, reg, typ, RepositoryOptions{})
	require.NoError(t, err)

	inst, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	for _, cmd := range []string{"a", "b", "c"} {
		_, err := repo.Save(ctx, inst, []any{noted{N: 1}, noted{N: 2}}, SaveOptions{CommandID: cmd})
		require.NoError(t, err)
	}
	// "b" is at versions 2-3; pretend "zzz" and "c" hash like "a" does.
	for k := range inst.commands {
		if inst.commands[k].hash == inst.hash("c") {
			inst.commands[k].first = 0
		}
	}
	inst.commands = append(inst.commands, remembered{hash: inst.hash("zzz"), first: 0})

	_, found, err := repo.priorOutcome(ctx, inst, "zzz")
	require.NoError(t, err)
	assert.False(t, found, "a colliding hash must not make a new command a duplicate")

	out, found, err := repo.priorOutcome(ctx, inst, "c")
	require.NoError(t, err)
	require.True(t, found, "a command whose hash collides is still found")
	assert.Equal(t, uint64(4), out.FirstVersion)
	assert.Equal(t, uint64(5), out.LastVersion)
	assert.Equal(t, []any{noted{N: 1}, noted{N: 2}}, out.Events)

	out, found, err = repo.priorOutcome(ctx, inst, "b")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, [2]uint64{2, 3}, [2]uint64{out.FirstVersion, out.LastVersion})
}

// TestRememberedCommandsAreBounded tracks a million commands on one
// instance, as a hot aggregate cached for a long time would, and measures
// the heap it keeps: at most rememberedCommands entries of 16 bytes, however
// many commands it saw. (A map of every command, as before, kept tens of
// megabytes here.) The forgotten commands are below base, so the store is
// asked about them.
func TestRememberedCommandsAreBounded(t *testing.T) {
	const commands = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	inst := &Instance[note, *note]{ID: "1", Stream: "note-1", State: &note{}, seed: maphash.MakeSeed()}
	buf := make([]byte, 0, 32)
	for v := range uint64(commands) {
		buf = strconv.AppendUint(append(buf[:0], "cmd-"...), v, 10)
		inst.track(string(buf), v)
		inst.track(string(buf), v) // a command's second event is the same command
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	runtime.KeepAlive(inst)

	// The entries themselves: exactly the bound. The heap as a whole, which
	// the runtime's own allocations make noisy by a few KiB either way: far
	// below the 38 MB that a map of 2^20 commands keeps.
	assert.Len(t, inst.commands, rememberedCommands)
	assert.LessOrEqual(t, uintptr(cap(inst.commands))*unsafe.Sizeof(remembered{}), uintptr(16<<10))
	assert.Less(t, kept, int64(64<<10), "bytes kept by one instance after %d commands", commands)
	t.Logf("one instance keeps %d bytes of heap after %d commands", kept, commands)
	assert.Equal(t, uint64(commands-rememberedCommands), inst.base, "everything older than the remembered commands is below base")
	for _, v := range []uint64{commands - 1, commands - rememberedCommands} {
		first, ok := inst.remembers("cmd-" + strconv.FormatUint(v, 10))
		assert.True(t, ok, "command %d is remembered", v)
		assert.Equal(t, v, first)
	}
	_, ok := inst.remembers("cmd-" + strconv.FormatUint(commands-rememberedCommands-1, 10))
	assert.False(t, ok, "the newest forgotten command")
}

// TestForgottenCommandsAreAskedOfTheStore saves more commands on one
// instance than it remembers; the oldest, forgotten, is still found as a
// duplicate, through the store's command index or by a scan without one,
// and a new command is still not one.
func TestForgottenCommandsAreAskedOfTheStore(t *testing.T) {
	ctx := context.Background()
	mem, reg, typ := noteSetup(t)
	for name, store := range map[string]eventstore.Store{"index": mem, "scan": struct{ eventstore.Store }{mem}} {
		t.Run(name, func(t *testing.T) {
			repo, err := NewRepository(store, reg, typ, RepositoryOptions{})
			require.NoError(t, err)
			inst, err := repo.Load(ctx, name)
			require.NoError(t, err)
			for c := range rememberedCommands + 10 {
				_, err := repo.Save(ctx, inst, []any{noted{N: 1}, noted{N: 2}}, SaveOptions{CommandID: fmt.Sprint("c", c)})
				require.NoError(t, err)
			}
			_, ok := inst.remembers("c0")
			require.False(t, ok, "the oldest command is forgotten")

			out, found, err := repo.priorOutcome(ctx, inst, "c0")
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, [2]uint64{0, 1}, [2]uint64{out.FirstVersion, out.LastVersion})
			assert.Equal(t, []any{noted{N: 1}, noted{N: 2}}, out.Events)

			_, found, err = repo.priorOutcome(ctx, inst, "new")
			require.NoError(t, err)
			assert.False(t, found)
		})
	}
}

// countingStore counts the events its reads yield, and has no command index.
type countingStore struct {
	eventstore.Store
	read int
}

func (s *countingStore) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	return func(yield func(eventstore.Event, error) bool) {
		for e, err := range s.Store.ReadStream(ctx, stream, opts) {
			s.read++
			if !yield(e, err) {
				return
			}
		}
	}
}

// TestRecentOutcomeNeverAsksTheStore: a new command on an instance that
// remembers nothing below its base costs no read (the append's event-ID
// check catches an old one), and the answer says it is not certain; a
// remembered command is found; PriorOutcome is exact, reading the whole
// stream below base of a store without a command index.
func TestRecentOutcomeNeverAsksTheStore(t *testing.T) {
	ctx := context.Background()
	mem, reg, typ := noteSetup(t)
	for c := range 100 {
		_, err := mem.Append(ctx, "note-1", eventstore.Any, eventstore.EventData{Type: "note.noted", SchemaVersion: 1, Data: []byte(`{"n":1}`),
			Metadata: eventstore.Metadata{CommandID: fmt.Sprint("c", c)}})
		require.NoError(t, err)
	}
	store := &countingStore{Store: mem}
	repo, err := NewRepository(store, reg, typ, RepositoryOptions{})
	require.NoError(t, err)
	inst, err := repo.Load(ctx, "1")
	require.NoError(t, err)

	store.read = 0
	out, found, certain, err := repo.recentOutcome(ctx, inst, "c95")
	require.NoError(t, err)
	assert.True(t, found && certain, "a remembered command is found")
	assert.Equal(t, uint64(95), out.FirstVersion)
	_, found, certain, err = repo.recentOutcome(ctx, inst, "new")
	require.NoError(t, err)
	assert.True(t, !found && certain, "an instance that remembers every command knows a new one")

	inst.commands, inst.next, inst.base = nil, 0, 100 // as if restored from a snapshot at version 99
	store.read = 0
	_, found, certain, err = repo.recentOutcome(ctx, inst, "new")
	require.NoError(t, err)
	assert.False(t, found)
	assert.False(t, certain, "below what it remembers the instance cannot tell")
	assert.Equal(t, 0, store.read, "events read")

	store.read = 0
	_, found, err = repo.priorOutcome(ctx, inst, "new")
	require.NoError(t, err)
	assert.False(t, found)
	assert.Equal(t, 100, store.read, "PriorOutcome is exact: it reads the whole stream below base")
	out, found, err = repo.priorOutcome(ctx, inst, "c7")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, uint64(7), out.FirstVersion)
}
