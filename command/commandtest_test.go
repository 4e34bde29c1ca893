package command_test

import (
	"testing"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

func TestBusOnMemory(t *testing.T) {
	commandtest.Run(t, func(t testing.TB) eventstore.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
