// Command inbox consumes an external at-least-once queue with a command bus:
// the queue message's ID becomes the command's ID, so that every message
// takes effect once whatever the queue redelivers.
//
// The queue (broker.go) behaves as cloud queues do: a message that is not
// acknowledged within its visibility timeout comes back; a publisher whose
// acknowledgement was lost publishes the message again; acknowledgements get
// lost. The workers add their own failures: one crashes after its command
// committed but before it acknowledged, another stalls past the visibility
// timeout while the queue hands its message to a second worker. Two replicas
// of the service, each with its own bus, consume at once. No inbox table, no
// "processed IDs" cache with a time-to-live and no ownership lease is
// needed: the command ID is stored with the events it produced, in the same
// append, so a redelivery at any time later finds it there.
//
//	go run ./examples/inbox [-messages 300] [-data dir]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/examples/internal/datadir"
)

// config sizes a run.
type config struct {
	dataDir    string // empty: a temporary folder, removed afterwards
	messages   int
	accounts   int
	workers    int
	visibility time.Duration
	logger     *slog.Logger
}

func main() {
	cfg := config{accounts: 25, workers: 4, visibility: 40 * time.Millisecond}
	flag.StringVar(&cfg.dataDir, "data", "", "folder for the SQLite file (default: a temporary folder, removed afterwards)")
	flag.IntVar(&cfg.messages, "messages", 300, "messages to publish")
	flag.Parse()
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := run(context.Background(), cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// report is what a run measured, for the summary and the test.
type report struct {
	published, republished                    int
	deliveries, redeliveries                  int
	crashes, lostAcks, stalls, overlaps       int
	applied, duplicates, conflicts, contended int
	events                                    int  // events stored
	onePerID                                  bool // every message ID has exactly one event
	points                                    int  // the sum of the balances
	wantPoints                                int  // the sum of the points published
	wrongBalances                             []string
}

func run(ctx context.Context, cfg config, out io.Writer) (report, error) {
	var r report
	dir, removeDir, err := datadir.Open(cfg.dataDir, "cairn-inbox")
	if err != nil {
		return r, err
	}
	defer removeDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "inbox.db"), sqlite.Options{Logger: cfg.logger})
	if err != nil {
		return r, err
	}
	defer store.Close()
	reg := codec.NewRegistry(codec.Options{})
	if err := codec.Register[PointsAwarded](reg, "loyalty.points_awarded", 1); err != nil {
		return r, err
	}
	accounts, err := aggregate.NewType[Account]("account", aggregate.Options[Account]{},
		aggregate.Handles((*Account).Award), aggregate.Applies((*Account).Awarded))
	if err != nil {
		return r, err
	}
	// Two replicas of the service, each with its own bus and cache.
	stats := &busStats{}
	var buses []*command.Bus
	for range 2 {
		bus := command.New(store, reg, command.Options{Middleware: []command.Middleware{stats.observe()}, Logger: cfg.logger})
		if err := command.Route[AwardPoints](bus, accounts); err != nil {
			return r, err
		}
		buses = append(buses, bus)
	}

	// The shop publishes one message per purchase. Accounts get a prefix
	// of their own per run, so that a data folder can be reused.
	prefix := uuid.NewString()[:8]
	q := newBroker(cfg.visibility)
	want := make(map[string]int) // account -> points
	ids := make(map[string]bool)
	for i := range cfg.messages {
		m := message{ID: uuid.NewString(), Body: AwardPoints{
			Account: fmt.Sprintf("%s.%02d", prefix, i%cfg.accounts),
			Points:  1 + rand.IntN(50),
			Order:   fmt.Sprintf("order-%d", i),
		}}
		want[m.Body.Account] += m.Body.Points
		r.wantPoints += m.Body.Points
		ids[m.ID] = true
		q.publish(m)
	}

	c := &consumer{queue: q}
	start := time.Now()
	if err := c.drain(ctx, cfg.workers, buses); err != nil {
		return r, err
	}
	elapsed := time.Since(start)

	r.published, r.republished = q.published, q.republished
	r.deliveries, r.redeliveries, r.lostAcks = q.receives, q.redeliveries, q.lostAcks
	r.crashes, r.stalls, r.overlaps, r.contended = int(c.crashes.Load()), int(c.stalls.Load()), int(c.overlaps.Load()), int(c.contended.Load())
	r.applied, r.duplicates, r.conflicts = int(stats.applied.Load()), int(stats.duplicates.Load()), int(stats.conflicts.Load())
	if err := check(ctx, store, reg, accounts, prefix, ids, want, &r); err != nil {
		return r, err
	}

	fmt.Fprintf(out, "queue: %d messages for %d accounts, %d workers on 2 replicas, %s\n",
		r.published, cfg.accounts, cfg.workers, elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "  published twice (publish ack lost):    %4d\n", r.republished)
	fmt.Fprintf(out, "  deliveries:                            %4d\n", r.deliveries)
	fmt.Fprintf(out, "  redeliveries after the timeout:        %4d\n", r.redeliveries)
	fmt.Fprintf(out, "  crashed between commit and ack:        %4d\n", r.crashes)
	fmt.Fprintf(out, "  acks lost by the queue:                %4d\n", r.lostAcks)
	fmt.Fprintf(out, "  stalled past the visibility timeout:   %4d\n", r.stalls)
	fmt.Fprintf(out, "  one message at two workers at once:    %4d\n", r.overlaps)
	fmt.Fprintf(out, "effects (message ID = command ID):\n")
	fmt.Fprintf(out, "  applied:                               %4d\n", r.applied)
	fmt.Fprintf(out, "  duplicates absorbed:                   %4d  (earlier result returned, nothing appended)\n", r.duplicates)
	if r.conflicts > 0 {
		fmt.Fprintf(out, "  version conflicts retried:             %4d  (two replicas deciding on one account at once)\n", r.conflicts)
	}
	if r.contended > 0 {
		fmt.Fprintf(out, "  left unacknowledged, contended:        %4d  (redelivered, then applied or absorbed)\n", r.contended)
	}
	switch {
	case r.applied != r.published:
		return r, fmt.Errorf("%d messages published, %d took effect", r.published, r.applied)
	case !r.onePerID || r.events != r.published:
		return r, fmt.Errorf("%d events stored for %d message IDs, not one each", r.events, r.published)
	case len(r.wrongBalances) > 0:
		return r, fmt.Errorf("balances that differ from the points published: %v", r.wrongBalances)
	}
	fmt.Fprintf(out, "exactly once: %d events, one per message ID; the %d balances add up to the %d points published\n",
		r.events, cfg.accounts, r.points)
	return r, nil
}

// check reads back what the store holds for this run: one event per message
// ID, and each account's balance as the aggregate loads it.
func check(ctx context.Context, store eventstore.Store, reg *codec.Registry, accounts *aggregate.Type[Account, *Account],
	prefix string, ids map[string]bool, want map[string]int, r *report) error {
	perID := make(map[string]int)
	filter := eventstore.Filter{StreamPrefixes: []string{eventstore.Category(accounts.Name()) + prefix + "."}}
	for e, err := range store.ReadAll(ctx, eventstore.Start, filter) {
		if err != nil {
			return err
		}
		perID[e.Metadata.CommandID]++
		r.events++
	}
	r.onePerID = len(perID) == len(ids)
	for id, n := range perID {
		if n != 1 || !ids[id] {
			r.onePerID = false
		}
	}
	repo, err := aggregate.NewRepository(store, reg, accounts, aggregate.RepositoryOptions{})
	if err != nil {
		return err
	}
	for account, points := range want {
		inst, err := repo.Load(ctx, account)
		if err != nil {
			return err
		}
		r.points += inst.State.balance
		if inst.State.balance != points {
			r.wrongBalances = append(r.wrongBalances, fmt.Sprintf("%s: %d, want %d", account, inst.State.balance, points))
		}
	}
	return nil
}
