package linearize

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// recorder runs the clients of one history against a store and collects
// what each operation was sent and returned.
type recorder struct {
	store eventstore.Store
	opts  Options
	names []string
	ids   idSpace
	// last is the last ordinal handed out; clock orders calls and returns
	// (see call).
	last  atomic.Uint64
	clock atomic.Int64
}

// clientTally is what one client counts as it goes.
type clientTally struct {
	appends, reads, ok, fail, unknown, duplicates, canceled int
	unexpected                                              int
	firstUnexpected                                         error
}

// client is one goroutine of the workload. Like an application's writer, it
// appends with the version it last saw, so clients race and many appends
// conflict; some send a stale version, Any, NoStream or StreamExists, some
// send an earlier append again (a publisher's retry), and some give up on
// their append after less than a millisecond, leaving its outcome unknown.
type client struct {
	r     *recorder
	index int
	rng   *rand.Rand
	known []knowledge
	// sent holds this client's latest appends, to send again.
	sent []appendInput
	// retry is an append whose outcome the client does not know; it
	// usually sends it again next, as a publisher would.
	retry *appendInput
	ops   []porcupine.Operation
	tally clientTally
}

// knowledge is what a client last learned of a stream's state.
type knowledge struct {
	exists bool
	last   uint64
}

// keptAppends is how many of its latest appends a client may send again.
const keptAppends = 8

// record runs the workload and returns every operation, with the clients'
// tallies.
func (r *recorder) record(ctx context.Context) ([]porcupine.Operation, []clientTally, error) {
	clients := make([]*client, r.opts.Clients)
	perClient := max(1, r.opts.Operations/r.opts.Clients)
	errs := make([]error, len(clients))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = &client{
			r:     r,
			index: i,
			rng:   rand.New(rand.NewPCG(r.opts.Seed, uint64(i))),
			known: make([]knowledge, len(r.names)),
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = clients[i].run(ctx, perClient)
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	var (
		ops     []porcupine.Operation
		tallies []clientTally
	)
	for _, c := range clients {
		ops = append(ops, c.ops...)
		tallies = append(tallies, c.tally)
	}
	return ops, tallies, nil
}

// run performs n operations.
func (c *client) run(ctx context.Context, n int) error {
	for range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Between two operations a client lets the others run, as an
		// application does other work: on a store as fast as memory, a
		// goroutine would otherwise do many operations in one time slice
		// and rarely race anyone.
		runtime.Gosched()
		if in := c.retry; in != nil {
			c.retry = nil
			if c.rng.Float64() < 0.7 {
				if err := c.append(ctx, *in, false); err != nil {
					return err
				}
				continue
			}
		}
		var err error
		switch p := c.rng.Float64(); {
		case p < 0.42:
			short := c.rng.Float64() < c.r.opts.DeadlineRate
			err = c.append(ctx, c.freshAppend(short), short)
		case p < 0.50:
			err = c.append(ctx, c.resend(), false)
		case p < 0.75:
			err = c.read(ctx, c.rng.IntN(len(c.known)), eventstore.Forward(0))
		case p < 0.87:
			opts := eventstore.Backward(eventstore.End)
			opts.Limit = c.rng.IntN(4) // 0: the whole stream
			err = c.read(ctx, c.rng.IntN(len(c.known)), opts)
		default:
			// The last few events, as a consumer polling the stream
			// reads them. (Events further back never change: a read of
			// them fits so many states that the checker slows down.)
			s := c.rng.IntN(len(c.known))
			opts := eventstore.Forward(0)
			if k := c.known[s]; k.exists {
				opts.From = k.last + 1 - min(k.last+1, c.rng.Uint64N(4))
			}
			opts.Limit = 1 + c.rng.IntN(5)
			err = c.read(ctx, s, opts)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// freshAppend returns an append of 1 to 3 new events to a random stream.
// One that its client will give up on (short) expects the version the
// client last saw, as a command handler's append does: the checker can
// place an append of unknown outcome that expects Any or StreamExists at
// every point of the history, which makes it far slower.
func (c *client) freshAppend(short bool) appendInput {
	s := c.rng.IntN(len(c.known))
	ids := c.newIDs(1 + c.rng.IntN(3))
	k := c.known[s]
	var expected eventstore.ExpectedVersion
	switch q := c.rng.Float64(); {
	case q < 0.55 || short: // what the client last saw: races the other clients
		expected = storekit.StreamState(k.last, k.exists)
	case q < 0.70: // a stale version
		if k.exists && k.last > 0 {
			expected = eventstore.Exact(k.last - 1 - c.rng.Uint64N(min(3, k.last)))
		} else {
			expected = eventstore.Exact(c.rng.Uint64N(3))
		}
	case q < 0.80:
		expected = eventstore.Any
	case q < 0.90:
		expected = eventstore.NoStream
	default:
		expected = eventstore.StreamExists
	}
	return appendInput{stream: s, expected: expected, ids: ids}
}

// resend returns one of the client's latest appends again: mostly as it
// was (an idempotent retry), sometimes with Any, sometimes with its first
// event and new ones (a partial repeat, which must conflict once the first
// is stored).
func (c *client) resend() appendInput {
	if len(c.sent) == 0 {
		return c.freshAppend(false)
	}
	in := c.sent[c.rng.IntN(len(c.sent))]
	switch q := c.rng.Float64(); {
	case q < 0.7:
	case q < 0.85:
		in.expected = eventstore.Any
	default:
		in.ids = append([]uint64{in.ids[0]}, c.newIDs(1+c.rng.IntN(2))...)
	}
	return in
}

// newIDs hands out n new ordinals.
func (c *client) newIDs(n int) []uint64 {
	last := c.r.last.Add(uint64(n))
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = last - uint64(n-1-i)
	}
	return ids
}

// call returns a timestamp for an operation's call or return. A shared
// atomic counter is a clock that agrees with real time where it matters:
// an operation that returned before another was called has a smaller
// return stamp than that call stamp, and the atomic read-modify-write
// orders these stamps on every architecture (porcupine issue 40).
func (r *recorder) call() int64 { return r.clock.Add(1) }

// append sends one append, with a deadline under a millisecond when short
// is set, and records it.
func (c *client) append(ctx context.Context, in appendInput, short bool) error {
	if in.ids[len(in.ids)-1] > maxOrdinal {
		return fmt.Errorf("linearize: more than %d event IDs in one history", uint64(maxOrdinal))
	}
	events := make([]eventstore.EventData, len(in.ids))
	for i, n := range in.ids {
		events[i] = eventstore.EventData{ID: c.r.ids.id(n), Type: "linearize.appended", Data: []byte("{}")}
	}
	opCtx, cancel := ctx, context.CancelFunc(func() {})
	if short {
		opCtx, cancel = context.WithTimeout(ctx, time.Duration(c.rng.Int64N(1000))*time.Microsecond)
	}
	defer cancel()

	called := c.r.call()
	res, err := c.r.store.Append(opCtx, c.r.names[in.stream], in.expected, events...)
	returned := c.r.call()

	out, err := c.classify(ctx, opCtx, in, res, err)
	if err != nil {
		return err
	}
	c.tally.appends++
	switch out.outcome {
	case appended:
		c.tally.ok++
		if out.duplicate {
			c.tally.duplicates++
		} else {
			c.known[in.stream] = knowledge{exists: true, last: out.last}
		}
	case wrongVersion:
		c.tally.fail++
		if out.actualKnown {
			last, exists := out.actual.Version()
			c.known[in.stream] = knowledge{exists: exists, last: last}
		}
	case idConflict:
		c.tally.fail++
	case canceled:
		c.tally.fail++
		c.tally.canceled++
		c.retry = &in
	default:
		c.tally.unknown++
		c.retry = &in
	}
	if len(c.sent) == keptAppends {
		c.sent = append(c.sent[:0], c.sent[1:]...)
	}
	c.sent = append(c.sent, in)
	c.ops = append(c.ops, porcupine.Operation{ClientId: c.index, Input: in, Call: called, Output: out, Return: returned})
	return nil
}

// classify turns what Append returned into an output, or an error that
// ends the history: malformed input (a bug of this package) or the end of
// the whole run's context.
func (c *client) classify(ctx, opCtx context.Context, in appendInput, res eventstore.AppendResult, err error) (appendOutput, error) {
	var wv *eventstore.WrongVersionError
	switch {
	case err == nil:
		return appendOutput{outcome: appended, first: res.FirstVersion, last: res.LastVersion, duplicate: res.Duplicate}, nil
	case errors.As(err, &wv):
		return appendOutput{outcome: wrongVersion, actual: wv.Actual, actualKnown: true}, nil
	case errors.Is(err, eventstore.ErrWrongVersion):
		return appendOutput{outcome: wrongVersion}, nil
	case errors.Is(err, eventstore.ErrEventIDConflict):
		return appendOutput{outcome: idConflict}, nil
	case errors.Is(err, eventstore.ErrInvalidArgument):
		return appendOutput{}, fmt.Errorf("linearize: the store calls an append of this workload malformed: %w", err)
	case ctx.Err() != nil:
		return appendOutput{}, ctx.Err()
	case opCtx.Err() != nil:
		if c.r.opts.CanceledAppendsWriteNothing && errors.Is(err, opCtx.Err()) {
			return appendOutput{outcome: canceled}, nil
		}
		return appendOutput{outcome: unknown}, nil
	}
	c.unexpected(fmt.Errorf("append to stream %q expecting %s: %w", c.r.names[in.stream], in.expected, err))
	return appendOutput{outcome: unknown}, nil
}

// unexpected counts an error that a healthy store does not return under
// this load.
func (c *client) unexpected(err error) {
	c.tally.unexpected++
	if c.tally.firstUnexpected == nil {
		c.tally.firstUnexpected = err
	}
}

// read reads stream s with opts and records what it yielded. A read that
// fails observed nothing: it is counted as unexpected and left out of the
// history.
func (c *client) read(ctx context.Context, s int, opts eventstore.ReadOptions) error {
	var (
		out  readOutput
		rerr error
	)
	called := c.r.call()
	for e, err := range c.r.store.ReadStream(ctx, c.r.names[s], opts) {
		if err != nil {
			rerr = err
			break
		}
		out.ids = append(out.ids, c.r.ids.ordinal(e.ID))
		out.versions = append(out.versions, e.Version)
	}
	returned := c.r.call()
	if rerr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.unexpected(fmt.Errorf("read stream %q: %w", c.r.names[s], rerr))
		return nil
	}
	c.tally.reads++
	c.tally.ok++
	if whole := opts.From == 0 && !opts.Backward && opts.Limit == 0; whole || opts.From == eventstore.End && opts.Backward {
		var k knowledge
		if n := len(out.versions); n > 0 {
			k.exists = true
			k.last = out.versions[0]
			if whole {
				k.last = out.versions[n-1]
			}
		}
		c.known[s] = k
	}
	c.ops = append(c.ops, porcupine.Operation{ClientId: c.index, Input: readInput{stream: s, opts: opts}, Call: called, Output: out, Return: returned})
	return nil
}
