package aggregate_test

import (
	"context"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// s7Stub embeds a nil *memory.Store for its method set (a test double)
// and reads streams its own way: every stream is missing.
type s7Stub struct{ *memory.Store }

func (s7Stub) ReadStream(context.Context, string, eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	return func(func(eventstore.Event, error) bool) {}
}

// TestReviewS7RepositoryOverAStubWithANilEmbeddedStore: a repository over
// such a stub loads through the stub's ReadStream, as it did before stores
// handed out page readers; asking the nil embedded store for its reader
// made NewRepository panic.
func TestReviewS7RepositoryOverAStubWithANilEmbeddedStore(t *testing.T) {
	repo, err := aggregate.NewRepository(s7Stub{}, newRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
	require.NoError(t, err)
	inst, err := repo.Load(context.Background(), "a")
	require.NoError(t, err)
	assert.False(t, inst.Exists)
}
