package memory_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

func TestCheckpointConformance(t *testing.T) {
	storetest.RunCheckpoints(t, func(t *testing.T) storekit.CheckpointStore { return memory.New() })
}

func TestDeadLetterConformance(t *testing.T) {
	storetest.RunDeadLetters(t, func(t *testing.T) storekit.DeadLetterStore { return memory.New() })
}

func TestLeaseConformance(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) storekit.LeaseStore { return memory.New() })
}

func TestTxDeadLetterConformance(t *testing.T) {
	storetest.RunTxDeadLetters(t, func(t *testing.T) storetest.TxDeadLetterStore[*memory.Tx] { return memory.New() })
}

func TestTxLeaseConformance(t *testing.T) {
	storetest.RunTxLeases(t, func(t *testing.T) storetest.TxLeaseStore[*memory.Tx] { return memory.New() })
}
