package deployments_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/internal/testrig/flowtest"
	"github.com/cairn-es/cairn/saga"
)

// Sizes: the TTL is short, and a slow handler takes half as long again.
const (
	orders   = 16
	leaseTTL = 500 * time.Millisecond
	slow     = leaseTTL * 3 / 2
	// slowOneIn is how rare slow handlers are: one event (or command) in
	// slowOneIn is slow, the first time it is handled.
	slowOneIn = 8
)

// TestTwoDeploymentsSQLite runs the reservation flow in two deployments,
// A and B, on one SQLite file: each opens the store on its own, places
// every order (both consume the same queue), and runs the Sale saga's
// runner (with RunnerOptions.Leases) and the read model (a transactional
// projection, with Options.Leases), all of them under leases of 500 ms.
// One event in 8 takes the read model 750 ms the first time it is handled,
// holding the transaction (and so SQLite's one writer) that long: renewals
// through the writer cannot get through. The saga runner's consumers,
// whose renewals wait behind it, lose their leases, and the other
// deployment takes over. The read model renews its lease in its own
// transaction (issue 21): its slow handlings no longer cost it the lease
// (each one did before; LongTransactionsKeepTheLease in projectiontest
// proves it alone), though under load, when no renewal gets through
// within the TTL, it may still lose one. One command in 8 takes 750 ms the
// first time the outbox sends it.
//
// The hazard must happen: leases lost (counted from the consumers' logs)
// and work redelivered (a saga command sent twice). And it must not bite:
// every order ends as expected, every event is counted once by the read
// model, every command the saga sent is applied once (flowtest.Check).
func TestTwoDeploymentsSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds; skipped in -short mode")
	}
	ctx := context.Background()
	spec := flowtest.SQLite(filepath.Join(t.TempDir(), "events.db"))
	os := flowtest.Seeded(1, orders)
	logs := &counter{}
	calls := &calls{events: make(map[string]int), commands: make(map[string]int)}
	base := flowtest.Config{Store: spec, Orders: os, Epoch: time.Unix(1_700_000_000, 0), Finish: true, ReadModel: true,
		LeaseTTL: leaseTTL, ReadModelHook: calls.readModel, Middleware: []command.Middleware{calls.outbox}}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, holder := range []string{"A", "B"} {
		cfg := base
		cfg.Holder = holder
		cfg.Logger = slog.New(logs.handler(holder))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = flowtest.Run(ctx, cfg)
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0], "deployment A")
	require.NoError(t, errs[1], "deployment B")

	s, err := flowtest.Open(ctx, spec)
	require.NoError(t, err)
	defer s.Close()
	tally, err := flowtest.Check(ctx, s, os, nil, true)
	require.NoError(t, err)

	rmLost, sagaLost := logs.lost(flowtest.ReadModelName), logs.lost(saga.StreamPrefix)
	rmAgain, cmdAgain, slowEvents, slowCommands := calls.redelivered()
	t.Logf("orders %d: applied %d, lost %d, duplicated %d, unexpected %d", tally.Attempts, tally.Applied, tally.Lost, tally.Duplicated, tally.Unexpected)
	t.Logf("read model: %d slow handlings, %d leases lost, %d events handled more than once", slowEvents, rmLost, rmAgain)
	t.Logf("saga: %d slow commands, %d leases lost, %d commands sent more than once; lease losses by consumer: %v",
		slowCommands, sagaLost, cmdAgain, logs.byConsumer())

	// The hazard happened...
	assert.Positive(t, slowEvents, "the read model must have had slow handlings")
	assert.Positive(t, sagaLost, "the saga runners' leases must be lost")
	assert.Positive(t, cmdAgain, "the saga's outbox must have sent commands again")
	// ...and did not bite.
	require.True(t, tally.Valid(), "%+v\n%s", tally, strings.Join(tally.Problems, "\n"))
	assert.Zero(t, tally.Duplicated)
}

// slowFirst reports whether key's first handling is slow: one key in
// slowOneIn, by its hash.
func slowFirst(key string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return h.Sum32()%slowOneIn == 0
}

// calls counts the handlings of each event by the read model and the
// dispatches of each command the saga sent, across both deployments, and
// makes some of them slow.
type calls struct {
	mu                         sync.Mutex
	events, commands           map[string]int
	slowEvents, slowCommandsAt int
}

// readModel is the read model's hook: it runs inside the transaction.
// Like a handler that calls a slow service, it does not watch ctx while
// it waits.
func (c *calls) readModel(ctx context.Context, d codec.Decoded) error {
	id := d.Event.ID.String()
	c.mu.Lock()
	c.events[id]++
	first := c.events[id] == 1
	if first && slowFirst(id) {
		c.slowEvents++
	} else {
		first = false
	}
	c.mu.Unlock()
	if first {
		time.Sleep(slow)
	}
	return nil
}

// outbox is a bus middleware: the dispatches of the saga's commands (not
// the placements) are counted, and some are slow.
func (c *calls) outbox(next command.Handler) command.Handler {
	return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
		if strings.HasPrefix(msg.ID, "place-") {
			return next.Dispatch(ctx, msg)
		}
		c.mu.Lock()
		c.commands[msg.ID]++
		wait := c.commands[msg.ID] == 1 && slowFirst(msg.ID)
		if wait {
			c.slowCommandsAt++
		}
		c.mu.Unlock()
		if wait {
			time.Sleep(slow)
		}
		return next.Dispatch(ctx, msg)
	})
}

// redelivered returns how many events the read model handled more than
// once, how many commands were sent more than once, and how many of each
// were slow.
func (c *calls) redelivered() (events, commands, slowEvents, slowCommands int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.events {
		if n > 1 {
			events++
		}
	}
	for _, n := range c.commands {
		if n > 1 {
			commands++
		}
	}
	return events, commands, c.slowEvents, c.slowCommandsAt
}

// counter counts the "lease lost" records of the consumers' logs, by
// deployment and consumer.
type counter struct {
	mu   sync.Mutex
	seen map[string]int // "holder consumer" -> lease losses
}

func (c *counter) handler(holder string) slog.Handler { return &countingHandler{c: c, holder: holder} }

// lost returns the lease losses of the consumers whose names start with
// prefix, in both deployments.
func (c *counter) lost(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.seen {
		if _, consumer, _ := strings.Cut(k, " "); strings.HasPrefix(consumer, prefix) {
			n += v
		}
	}
	return n
}

func (c *counter) byConsumer() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for k, v := range c.seen {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// countingHandler is a slog.Handler that counts the records that say a
// consumer lost its lease.
type countingHandler struct {
	c        *counter
	holder   string
	consumer string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "projection: lease lost; stopping" {
		return nil
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.c.seen == nil {
		h.c.seen = make(map[string]int)
	}
	h.c.seen[h.holder+" "+h.consumer]++
	return nil
}

func (h *countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	for _, a := range attrs {
		if a.Key == "consumer" {
			n.consumer = a.Value.String()
		}
	}
	return &n
}

func (h *countingHandler) WithGroup(string) slog.Handler { return h }
