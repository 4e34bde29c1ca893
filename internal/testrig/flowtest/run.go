package flowtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// Config is one run of the flow.
type Config struct {
	// Store is the spec of the store (see [SQLite], [Postgres]).
	Store string
	// Orders are the orders to place.
	Orders []Order
	// Epoch is where the saga's clock starts. Every process of one test
	// starts it there, so that the payment deadlines one process set fall
	// due when the next moves its clock past the payment window.
	Epoch time.Time
	// Ready, when set, is a file created once the saga (and read model)
	// run and before the first order is placed.
	Ready string
	// Acks, when set, is a file of acknowledged orders, one ID a line: an
	// order whose placement the bus acknowledged is added, and an order
	// listed is not placed again, as a queue drops the messages its
	// consumer acknowledged and redelivers the others. Without it every
	// order is placed (placing is idempotent by command ID).
	Acks string
	// Finish runs until every order has ended (moving the clock past the
	// payment window once only the deadlines are left) and the read model
	// has counted every event; without it Run places the orders and goes
	// on until ctx ends or the process is killed.
	Finish bool
	// ReadModel runs a transactional projection beside the saga that
	// counts each event of the flow's aggregates in a table of the store.
	ReadModel bool
	// Limit bounds how long Finish waits; zero means two minutes.
	Limit time.Duration
	// Logger receives the components' logs; nil discards them.
	Logger *slog.Logger

	// LeaseTTL, when set, has the saga runner's consumers and the read
	// model hold leases of this TTL in the store, as Holder: several
	// deployments running the flow on one store then take turns.
	LeaseTTL time.Duration
	Holder   string
	// ReadModelHook, when set, runs in each read model transaction before
	// the event's row is written (see [NewReadModelHooked]).
	ReadModelHook func(ctx context.Context, d codec.Decoded) error
	// Middleware wraps the bus that places the orders and that the saga's
	// outbox sends its commands through.
	Middleware []command.Middleware
}

// Environment of a child process that runs [Config].
const (
	envStore     = "CAIRN_FLOW_STORE"
	envOrders    = "CAIRN_FLOW_ORDERS"
	envEpoch     = "CAIRN_FLOW_EPOCH"
	envReady     = "CAIRN_FLOW_READY"
	envAcks      = "CAIRN_FLOW_ACKS"
	envFinish    = "CAIRN_FLOW_FINISH"
	envReadModel = "CAIRN_FLOW_READ_MODEL"
	envLimit     = "CAIRN_FLOW_LIMIT"
)

// Env returns cfg as environment variables, for a child process that
// calls [FromEnv]. Logger, the leases, ReadModelHook and Middleware are
// not passed.
func (cfg Config) Env() []string {
	return []string{envStore + "=" + cfg.Store, envOrders + "=" + encodeOrders(cfg.Orders),
		envEpoch + "=" + strconv.FormatInt(cfg.Epoch.UnixNano(), 10), envReady + "=" + cfg.Ready, envAcks + "=" + cfg.Acks,
		envFinish + "=" + strconv.FormatBool(cfg.Finish), envReadModel + "=" + strconv.FormatBool(cfg.ReadModel),
		envLimit + "=" + cfg.Limit.String()}
}

// FromEnv returns the Config that [Config.Env] passed to this process,
// and whether there is one.
func FromEnv() (Config, bool, error) {
	spec, ok := os.LookupEnv(envStore)
	if !ok {
		return Config{}, false, nil
	}
	cfg := Config{Store: spec, Ready: os.Getenv(envReady), Acks: os.Getenv(envAcks)}
	var err error
	if cfg.Orders, err = decodeOrders(os.Getenv(envOrders)); err != nil {
		return cfg, true, err
	}
	nanos, err := strconv.ParseInt(os.Getenv(envEpoch), 10, 64)
	if err != nil {
		return cfg, true, fmt.Errorf("flowtest: %s: %w", envEpoch, err)
	}
	cfg.Epoch = time.Unix(0, nanos)
	cfg.Finish = os.Getenv(envFinish) == "true"
	cfg.ReadModel = os.Getenv(envReadModel) == "true"
	if cfg.Limit, err = time.ParseDuration(os.Getenv(envLimit)); err != nil {
		return cfg, true, fmt.Errorf("flowtest: %s: %w", envLimit, err)
	}
	return cfg, true, nil
}

// Registry returns a codec registry with the flow's types.
func Registry() (*codec.Registry, error) {
	reg := codec.NewRegistry(codec.Options{})
	return reg, reservation.Register(reg)
}

// Run runs the flow as cfg says: the Sale saga (and the read model) on
// cfg.Store, and the orders placed by four workers through the bus.
func Run(ctx context.Context, cfg Config) (err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var s eventstore.Store
	if err := whileUnavailable(ctx, func() (err error) { s, err = Open(ctx, cfg.Store); return err }); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	reg, err := Registry()
	if err != nil {
		return err
	}
	bus := command.New(s, reg, command.Options{Logger: log, Middleware: cfg.Middleware})
	if err := reservation.Route(bus); err != nil {
		return err
	}
	sale, err := reservation.NewSale(reg)
	if err != nil {
		return err
	}
	// Time stands still until only deadlines are left, so that no payment
	// deadline races its payment.
	clock := sagatest.NewClock(cfg.Epoch)
	ropts := saga.RunnerOptions{Clock: clock, Logger: log, MaxBatchDelay: time.Millisecond}
	popts := projection.Options{Logger: log, MaxBatchDelay: time.Millisecond}
	if cfg.LeaseTTL > 0 {
		// The leases live in the store, beside the checkpoints.
		ropts.Exclusive, ropts.LeaseTTL, ropts.Holder = true, cfg.LeaseTTL, cfg.Holder
		popts.Exclusive, popts.LeaseTTL, popts.Holder = true, cfg.LeaseTTL, cfg.Holder
	}
	runner, err := saga.NewRunner(sale, s, bus, ropts)
	if err != nil {
		return err
	}
	var rm *projection.Consumer
	if cfg.ReadModel {
		if err := whileUnavailable(ctx, func() (err error) {
			rm, err = NewReadModelHooked(ctx, s, reg, popts, cfg.ReadModelHook)
			return err
		}); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	failed := make(chan error, 2)
	for _, run := range []func(context.Context) error{runner.Run, rmRun(rm)} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				failed <- err
				cancel()
			}
		}()
	}
	stop := func(err error) error {
		cancel()
		wg.Wait()
		select {
		case ferr := <-failed:
			return errors.Join(err, ferr)
		default:
			return err
		}
	}
	if cfg.Ready != "" {
		if err := os.WriteFile(cfg.Ready, nil, 0o600); err != nil {
			return stop(err)
		}
	}
	if err := place(ctx, bus, cfg.Orders, cfg.Acks); err != nil {
		return stop(err)
	}
	if !cfg.Finish {
		<-ctx.Done()
		return stop(nil)
	}
	limit := cfg.Limit
	if limit <= 0 {
		limit = 2 * time.Minute
	}
	return stop(finish(ctx, s, reg, clock, rm, cfg.Orders, limit))
}

func rmRun(rm *projection.Consumer) func(context.Context) error {
	if rm == nil {
		return func(context.Context) error { return nil }
	}
	return rm.Run
}

// place places every order that acks does not list, four at a time, and
// adds each one the bus acknowledges to acks.
func place(ctx context.Context, bus *command.Bus, orders []Order, acks string) error {
	var ackFile *os.File
	if acks != "" {
		done, err := Acked(acks)
		if err != nil {
			return err
		}
		var todo []Order
		for _, o := range orders {
			if !done[o.ID] {
				todo = append(todo, o)
			}
		}
		orders = todo
		if ackFile, err = os.OpenFile(acks, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			return err
		}
		defer ackFile.Close()
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(orders); i += workers {
				o := orders[i]
				err := whileUnavailable(ctx, func() error {
					_, err := bus.Dispatch(ctx, command.Message{ID: "place-" + o.ID,
						Command: domain.PlaceOrder{OrderID: o.ID, Seats: o.Seats, AmountCents: o.AmountCents}})
					return err
				})
				if err == nil && ackFile != nil {
					// One write each: a kill leaves whole lines.
					_, err = ackFile.WriteString(o.ID + "\n")
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("placing order %s: %w", o.ID, err))
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// whileUnavailable runs fn again, after a pause, while it fails because
// the store is unavailable for a while (eventstore.ErrUnavailable: another
// process held the SQLite file's lock past the store's busy timeout, as a
// deployment whose read model holds a long transaction does): as a queue
// redelivers a message whose handling failed, and a supervisor restarts a
// process that could not open its store. Other errors end it.
func whileUnavailable(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if !errors.Is(err, eventstore.ErrUnavailable) {
			return err
		}
		if backoff.Wait(ctx, 100*time.Millisecond) != nil {
			return err
		}
	}
}

// Acked returns the orders that the acks file lists.
func Acked(acks string) (map[string]bool, error) {
	b, err := os.ReadFile(acks)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	done := make(map[string]bool)
	for _, id := range strings.Fields(string(b)) {
		done[id] = true
	}
	return done, nil
}

// finish waits until every order has ended, moving the clock past the
// payment window once every order that needs no deadline has ended and
// every one that does has its payment pending (so its deadline is set),
// then until the read model, if any, has counted everything stored.
func finish(ctx context.Context, s eventstore.Store, reg *codec.Registry, clock *sagatest.Clock, rm *projection.Consumer, orders []Order, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	check, err := reservation.NewChecker(s, reg)
	if err != nil {
		return err
	}
	for _, deadlines := range []bool{false, true} {
		for {
			done, err := ended(ctx, check, orders, deadlines)
			if err != nil {
				return fmt.Errorf("flowtest: waiting for the orders to end (deadlines fired: %t): %w", deadlines, err)
			}
			if done {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("flowtest: the orders did not end within %v (deadlines fired: %t): %w", limit, deadlines, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
		if !deadlines {
			clock.Advance(reservation.PaymentWindow)
		}
	}
	if rm == nil {
		return nil
	}
	head, err := s.(projection.HeadReader).Head(ctx)
	if err != nil {
		return err
	}
	if err := rm.WaitFor(ctx, head); err != nil {
		return fmt.Errorf("flowtest: the read model did not count every event within %v: %w", limit, err)
	}
	return nil
}

// ended reports whether every order has ended; without deadlines, the
// orders that end by their deadline need only have their payment pending.
func ended(ctx context.Context, check *reservation.Checker, orders []Order, deadlines bool) (bool, error) {
	for _, o := range orders {
		want := reservation.Expect(o.Seats, o.AmountCents)
		end, err := check.End(ctx, o.ID)
		if err != nil {
			return false, err
		}
		if want.AfterDeadline && !deadlines {
			if !end.Pending {
				return false, nil
			}
			continue
		}
		if !end.Confirmed && !end.Rejected || want.Cancelled && !end.Cancelled {
			return false, nil
		}
	}
	return true, nil
}
