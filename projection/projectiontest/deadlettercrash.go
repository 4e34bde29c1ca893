package projectiontest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/upcast"
)

// The dead-letter crash tests kill a child process with SIGKILL between
// parking a dead letter (or resolving one) and the commit that should go
// with it, then restart the consumer in the parent with its dependency back
// up and retry whatever dead letters are left: item 5 must count exactly
// once. The child's role is "deadletter", its argument the mode.
const (
	roleDeadLetter = "deadletter"
	crashConsumer  = "dl-crash"
	// Lines a child prints when it reached the moment to be killed at.
	lineParked    = "child: parked"
	lineResolving = "child: resolving"
)

// deadLetterModes are the ways to park or resolve that a crash must not
// turn into a double apply.
var deadLetterModes = []string{"park-tx", "park-plain", "park-foreign", "decode-tx", "retry-tx"}

// hang stops the child at the moment to be killed at: it says so, and
// waits for the parent's SIGKILL (sleeping, so that the runtime does not
// take it for a deadlock).
func hang(line string) {
	fmt.Println(line)
	time.Sleep(time.Hour)
}

// crashClaimTTL is how long the claim of a killed retry lasts.
const crashClaimTTL = time.Second

// hangingStore hangs right after a dead letter is parked or deleted in it,
// before anything else commits; a retry's claim of a dead letter goes
// through.
type hangingStore[Tx any] struct{ ConsumerStore[Tx] }

func (s hangingStore[Tx]) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	got, err := s.ConsumerStore.ParkDeadLetter(ctx, d)
	if err == nil && d.ClaimedUntil.IsZero() {
		hang(lineParked)
	}
	return got, err
}

func (s hangingStore[Tx]) ParkDeadLetterTx(ctx context.Context, tx Tx, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	got, err := s.ConsumerStore.ParkDeadLetterTx(ctx, tx, d)
	if err == nil {
		hang(lineParked)
	}
	return got, err
}

func (s hangingStore[Tx]) DeleteDeadLetterTx(ctx context.Context, tx Tx, consumer, id string) error {
	err := s.ConsumerStore.DeleteDeadLetterTx(ctx, tx, consumer, id)
	if err == nil {
		hang(lineResolving)
	}
	return err
}

// hangingLetters is a dead letter store apart from the checkpoint's that
// hangs right after a dead letter is parked in it.
type hangingLetters struct{ storekit.DeadLetterStore }

func (s hangingLetters) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	got, err := s.DeadLetterStore.ParkDeadLetter(ctx, d)
	if err == nil {
		hang(lineParked)
	}
	return got, err
}

// legacyRegistry is [Registry] that also reads "ptest.legacy" v1, an
// event type the suite's registry does not know: a fix deployed after such
// an event was parked as undecodable.
func legacyRegistry(t testing.TB) *codec.Registry {
	return newRegistry(t, upcast.Rename("ptest.legacy", 1, "ptest.item", 1))
}

// lettersDir is where the dead letters of the "park-foreign" mode live: a
// store of their own, beside the consumer's.
func lettersDir(dir string) string { return filepath.Join(dir, "letters") }

// dlConsumer builds the crash tests' consumer on st: item 5 fails while
// down; a plain consumer writes its effects to the file effects, a line per
// item.
func dlConsumer[Tx any](t testing.TB, h Harness[Tx], st Stores[Tx], consumers ConsumerStore[Tx], letters storekit.DeadLetterStore,
	reg *codec.Registry, mode, effects string, down bool) *projection.Consumer {
	fail := func(n int) error {
		if down && n == 5 {
			return fmt.Errorf("the payment service is down")
		}
		return nil
	}
	opts := projection.Options{BatchSize: 4, Retry: fastRetry, DeadLetters: letters, LeaseTTL: crashClaimTTL, Logger: quiet()}
	if mode != "park-plain" {
		c, err := projection.NewTx(crashConsumer, st.Events, reg, consumers, countingTx(h, fail), opts)
		check.NoError(t, err)
		return c
	}
	f, err := os.OpenFile(effects, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	check.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	// A leading newline ends a line that a kill cut short.
	_, err = f.WriteString("\n")
	check.NoError(t, err)
	c, err := projection.New(crashConsumer, st.Events, reg, consumers, projection.Typed(func(_ context.Context, it Item, _ codec.Decoded) error {
		if err := fail(it.N); err != nil {
			return err
		}
		_, err := fmt.Fprintf(f, "%d\n", it.N)
		return err
	}), opts)
	check.NoError(t, err)
	return c
}

// runDeadLetterChild is the child of a dead-letter crash test: it runs the
// consumer of mode until the wrapped store hangs at the moment to be
// killed at.
func runDeadLetterChild[Tx any](t testing.TB, h Harness[Tx], st Stores[Tx], dir, mode string) {
	ctx := context.Background()
	effects := filepath.Join(dir, "effects.log")
	hanging := hangingStore[Tx]{ConsumerStore: st.Consumers}
	switch mode {
	case "park-tx", "park-plain", "decode-tx":
		check.NoError(t, dlConsumer(t, h, st, hanging, nil, Registry(t), mode, effects, true).CatchUp(ctx))
	case "park-foreign":
		letters := hangingLetters{DeadLetterStore: h.Open(t, lettersDir(dir)).Consumers}
		check.NoError(t, dlConsumer(t, h, st, st.Consumers, letters, Registry(t), mode, effects, true).CatchUp(ctx))
	case "retry-tx":
		c := dlConsumer(t, h, st, hanging, nil, Registry(t), mode, effects, false)
		letters := collectLetters(t, c)
		check.Len(t, letters, 1)
		check.NoError(t, c.RetryDeadLetter(ctx, letters[0].ID))
	default:
		t.Fatalf("unknown dead-letter crash mode %q", mode)
	}
	t.Fatalf("mode %q: the consumer never reached the moment to be killed at", mode)
}

// testDeadLetterCrash runs each mode: a child parks item 5 (or retries its
// dead letter) and is killed before its commit; the consumer restarted in
// the parent, with the dependency back, handles it; retrying every dead
// letter left must not apply it again.
func testDeadLetterCrash[Tx any](t testing.TB, h Harness[Tx]) {
	if h.Open == nil {
		t.Skip("the crash test needs stores that outlive a process (Harness.Open)")
	}
	for _, mode := range deadLetterModes {
		check.Run(t, mode, func(t testing.TB) {
			ctx := context.Background()
			dir := t.TempDir()
			st := h.Open(t, dir)
			effects := filepath.Join(dir, "effects.log")
			var letters storekit.DeadLetterStore
			if mode == "park-foreign" {
				check.NoError(t, os.Mkdir(lettersDir(dir), 0o700))
				letters = h.Open(t, lettersDir(dir)).Consumers
			}
			if mode == "decode-tx" {
				appendItems(t, st.Events, "item-a", 0, 5, 0)
				_, err := st.Events.Append(ctx, "item-a", eventstore.Any,
					eventstore.EventData{Type: "ptest.legacy", SchemaVersion: 1, Data: []byte(`{"n":5}`)})
				check.NoError(t, err)
				appendItems(t, st.Events, "item-a", 6, 4, 0)
			} else {
				appendItems(t, st.Events, "item-a", 0, 10, 0)
			}
			if mode == "retry-tx" {
				check.NoError(t, dlConsumer(t, h, st, st.Consumers, nil, Registry(t), mode, effects, true).CatchUp(ctx))
			}
			count := func(n int) int64 {
				if mode != "park-plain" {
					return h.Get(t, st, itemKey(n))
				}
				data, err := os.ReadFile(effects)
				check.NoError(t, err)
				k := int64(0)
				for _, line := range strings.Split(string(data), "\n") {
					if line == strconv.Itoa(n) {
						k++
					}
				}
				return k
			}
			checkpoint := func() eventstore.Position {
				cp, err := st.Consumers.Checkpoint(ctx, crashConsumer)
				check.NoError(t, err)
				return cp.Position
			}
			before := checkpoint()

			c := startChild(t, h, roleDeadLetter, dir, mode)
			line := lineParked
			if mode == "retry-tx" {
				line = lineResolving
			}
			c.waitFor(t, line)
			c.kill()
			check.True(t, !c.ended, "the child ended by itself:\n%s", c.output())

			reg := Registry(t)
			if mode == "decode-tx" {
				reg = legacyRegistry(t)
			}
			restarted := dlConsumer(t, h, st, st.Consumers, letters, reg, mode, effects, false)
			left := collectLetters(t, restarted)
			check.Equal(t, count(5), int64(0), "item 5 was applied by the killed child")
			switch mode {
			case "park-tx", "decode-tx":
				check.Len(t, left, 0, "a dead letter parked in a transaction that never committed")
			case "park-plain", "park-foreign":
				check.Len(t, left, 1, "the dead letter is parked on its own, before the checkpoint moves")
				check.True(t, checkpoint().Before(left[0].Event.Position),
					"the checkpoint (from %s) passed the event of a dead letter whose batch was killed", before)
			case "retry-tx":
				check.Len(t, left, 1, "a retry that never committed resolved its dead letter")
			}

			if mode == "retry-tx" {
				// The killed retry's claim holds until it lapses; then the
				// dead letter can be retried.
				err := restarted.RetryDeadLetter(ctx, left[0].ID)
				check.ErrorIs(t, err, projection.ErrRetryRefused, "a retry while the killed retry's claim holds")
				check.True(t, !left[0].ClaimedUntil.IsZero(), "the killed retry left no claim")
				time.Sleep(time.Until(left[0].ClaimedUntil) + 10*time.Millisecond)
				check.NoError(t, restarted.RetryDeadLetter(ctx, left[0].ID), "a retry once the killed retry's claim lapsed")
			} else {
				check.NoError(t, restarted.CatchUp(ctx))
			}
			retryLeftCountsOnce(t, restarted, count)
		})
	}
}

// waitFor waits until the child prints line, failing if it ends first.
func (c *child) waitFor(t testing.TB, line string) {
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(c.output(), line+"\n") {
		if c.finished() {
			t.Fatalf("child ended before printing %q:\n%s", line, c.output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("child did not print %q within a minute:\n%s", line, c.output())
		}
		time.Sleep(2 * time.Millisecond)
	}
}
