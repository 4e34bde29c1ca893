package memory_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

func TestCheckpointConformance(t *testing.T) {
	storetest.RunCheckpoints(t, func(t *testing.T) storekit.CheckpointStore { return memory.NewConsumers() })
}

func TestDeadLetterConformance(t *testing.T) {
	storetest.RunDeadLetters(t, func(t *testing.T) storekit.DeadLetterStore { return memory.NewConsumers() })
}

func TestLeaseConformance(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) storekit.LeaseStore { return memory.NewConsumers() })
}

func TestTxDeadLetterConformance(t *testing.T) {
	storetest.RunTxDeadLetters(t, func(t *testing.T) storetest.TxDeadLetterStore[*memory.Tx] { return memory.NewConsumers() })
}

func TestTxLeaseConformance(t *testing.T) {
	storetest.RunTxLeases(t, func(t *testing.T) storetest.TxLeaseStore[*memory.Tx] { return memory.NewConsumers() })
}
