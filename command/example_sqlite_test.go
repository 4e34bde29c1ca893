package command_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// The bus on the embedded SQLite store, as a service runs it: the store
// keeps the events, the command IDs that make redelivery harmless, and the
// snapshots, all in one file. A command redelivered after a restart (the
// queue never saw its acknowledgement) is answered from the file, not
// applied again.
func Example_sqlite() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	path := filepath.Join(dir, "bank.db")

	// One run of the service: open the file, route, dispatch.
	serve := func(msgs ...command.Message) {
		store, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			log.Fatal(err)
		}
		defer store.Close()
		reg := codec.NewRegistry(codec.Options{})
		err = errors.Join(
			codec.Register[Deposited](reg, "account.deposited", 1),
			codec.Register[Withdrawn](reg, "account.withdrawn", 1),
			codec.Register[Account](reg, "account.state", 1),
		)
		if err != nil {
			log.Fatal(err)
		}
		accounts, err := aggregate.NewType[Account]("account", aggregate.Options[Account]{SnapshotEvery: 100}, accountBindings...)
		if err != nil {
			log.Fatal(err)
		}
		bus := command.New(store, reg, command.Options{Snapshots: store})
		if err := errors.Join(command.Route[Deposit](bus, accounts), command.Route[Withdraw](bus, accounts)); err != nil {
			log.Fatal(err)
		}
		for _, m := range msgs {
			res, err := bus.Dispatch(ctx, m)
			if err != nil {
				fmt.Printf("%s: rejected: %v\n", m.ID, err)
				continue
			}
			fmt.Printf("%s: %s at version %d, duplicate %t\n", m.ID, res.Stream, res.Version, res.Duplicate)
		}
	}

	serve(command.Message{ID: "msg-1", Command: Deposit{AccountID: "42", Amount: 100}},
		command.Message{ID: "msg-2", Command: Withdraw{AccountID: "42", Amount: 30}})
	// The process restarts; the queue redelivers msg-2, then sends msg-3.
	serve(command.Message{ID: "msg-2", Command: Withdraw{AccountID: "42", Amount: 30}},
		command.Message{ID: "msg-3", Command: Withdraw{AccountID: "42", Amount: 80}})
	// Output:
	// msg-1: account-42 at version 0, duplicate false
	// msg-2: account-42 at version 1, duplicate false
	// msg-2: account-42 at version 1, duplicate true
	// msg-3: rejected: insufficient funds
}
