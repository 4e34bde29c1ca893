package storetest

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/memory"
)

// A read model for transactions the store does not have is the caller's
// mistake, reported as an error; it was taken for parts that do not apply,
// and the transactional and projection suites were skipped in silence
// (found by review).
func TestAReadModelOfAnotherTransactionTypeIsAnError(t *testing.T) {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, (txReadModel[*memory.Tx]{}).fits(s), "a read model of the store's own transactions")
	err := (txReadModel[*sql.Tx]{}).fits(s)
	require.Error(t, err, "a read model of *sql.Tx on a memory store")
	assert.Contains(t, err.Error(), "*sql.Tx")
	assert.Contains(t, err.Error(), "*memory.Store")
}
