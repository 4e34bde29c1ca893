package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/cairn-es/cairn/command"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// config is what one run of the example does.
type config struct {
	data string
	// store is the URL of the store; "" for the SQLite file in data.
	store string
	model model
	// orders are placed by clients at once through the queue, whose
	// workers dispatch them; each client places one every pace.
	orders, clients, workers int
	pace                     time.Duration
	// window is the sale's payment window.
	window time.Duration
	// seed fixes the orders and the queue's faults.
	seed uint64
	// kill kills the sale process once mid-way, and restarts it.
	kill bool
	// out receives the summary; progress the progress line (nil for
	// none).
	out      io.Writer
	progress *progress
	// trace is the -trace path: the sale processes write their spans
	// beside it ("" for none). tracerProvider and meterProvider are this
	// process's (nil for the global ones).
	trace          string
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
}

// result is what a run did and found: the summary's numbers.
type result struct {
	model  string
	orders []order
	queue  queueStats
	sale   saleReport
	// killedAt is how many of the clients' messages had taken effect, and
	// killedEnded how many orders had ended, when the sale was killed;
	// killedAt is -1 if it was not.
	killedAt, killedEnded int
	// earlier is the history as this run found it; history as it left it.
	earlier, history *history
	// sameAsSaved says the earlier history equals the one the previous
	// run saved, written by savedBy.
	savedBy     string
	notReserved []refusal
	elapsed     time.Duration
}

// run places cfg.orders orders through the queue, with the sale in a
// process of its own, and waits until every order has ended.
func run(ctx context.Context, cfg config) (*result, error) {
	svc, err := openService(ctx, cfg.data, cfg.store, cfg.model)
	if err != nil {
		return nil, err
	}
	defer svc.close()
	svc.tp, svc.mp = cfg.tracerProvider, cfg.meterProvider
	res := &result{model: cfg.model.name, killedAt: -1}

	// What is there already, read by this version's code.
	saved, err := loadSaved(cfg.data)
	if err != nil {
		return nil, err
	}
	if saved != nil && saved.Model == modelV2.name && cfg.model.name != modelV2.name {
		return nil, fmt.Errorf("the data in %s was written by %s; %s cannot read it (run with -%s, or use another -data folder)",
			cfg.data, saved.Model, cfg.model.name, saved.Model)
	}
	reader, err := cfg.model.newSale(svc.reg, svc.store, nil, svc.runnerOptions(), cfg.window)
	if err != nil {
		return nil, err
	}
	if res.earlier, err = readHistory(ctx, svc, reader); err != nil {
		return nil, fmt.Errorf("reading the history with %s: %w", cfg.model.name, err)
	}
	if saved != nil {
		if err := sameHistory(saved.History, res.earlier); err != nil {
			return nil, fmt.Errorf("%s reads the history differently from %s, which saved it: %w", cfg.model.name, saved.Model, err)
		}
		res.savedBy = saved.Model
	}
	cfg.progress.printf("%s: %d orders in %s already; placing %d more from %d clients\n",
		cfg.model.name, res.earlier.Orders, svc.where, cfg.orders, cfg.clients)

	// The read models follow the store while the orders run.
	board, err := newBoard(ctx, svc)
	if err != nil {
		return nil, err
	}
	refused, err := newNotReserved(ctx, svc)
	if err != nil {
		return nil, err
	}
	if err := board.consumer.CatchUp(ctx); err != nil {
		return nil, err
	}
	before, err := board.counts(ctx)
	if err != nil {
		return nil, err
	}
	live, stopLive := context.WithCancel(ctx)
	projected := make(chan error, 2)
	go func() { projected <- board.consumer.Run(live) }()
	go func() { projected <- refused.consumer.Run(live) }()
	defer stopLive()

	rng := rand.New(rand.NewPCG(cfg.seed, 15))
	res.orders = newOrders(cfg.orders, cfg.model.name+strconv.FormatUint(rng.Uint64()%(36*36*36*36), 36)+"x", rng)
	sends, planned := plan(res.orders, cfg.model.messages, rng)

	sale, err := startSale(saleConfig{Data: cfg.data, Store: cfg.store, Model: cfg.model.name, Window: cfg.window}, cfg.trace)
	if err != nil {
		return nil, err
	}
	defer sale.close()
	bus, err := svc.newBus(func(context.Context, command.Observation) {})
	if err != nil {
		return nil, err
	}

	// The clients place the orders while this goroutine watches.
	start := time.Now()
	q := &queue{stats: planned}
	placing, stopPlacing := context.WithCancel(ctx)
	placed := make(chan error, 1)
	go func() {
		var err error
		res.queue, err = q.run(placing, bus, sends, cfg.clients, cfg.workers, cfg.pace)
		placed <- err
	}()
	err = res.wait(ctx, cfg, board, before, q, placed, sale)
	stopPlacing()
	if err != nil {
		<-placed
		if errors.Is(err, errStuck) {
			return nil, stuck(ctx, board, reader)
		}
		return nil, err
	}
	res.elapsed = time.Since(start)
	cfg.progress.done()

	// Stop the sale (it sends what its last steps recorded) and the read
	// models, then bring the read models up to date.
	if res.sale, err = sale.stop(); err != nil {
		return nil, err
	}
	stopLive()
	for range 2 {
		if err := <-projected; err != nil {
			return nil, err
		}
	}
	if err := board.consumer.CatchUp(ctx); err != nil {
		return nil, err
	}
	if err := refused.consumer.CatchUp(ctx); err != nil {
		return nil, err
	}
	if res.notReserved, err = refused.list(ctx); err != nil {
		return nil, err
	}
	if res.history, err = readHistory(ctx, svc, reader); err != nil {
		return nil, err
	}
	if err := res.check(); err != nil {
		return res, err
	}
	return res, save(cfg.data, cfg.model.name, res.history)
}

// errStuck says that orders did not end in time.
var errStuck = errors.New("orders did not end in time")

// wait shows the progress of this run's orders until every one has ended
// (and the queue has delivered every message), killing the sale process
// once on the way when cfg.kill is set. before are the board's counts
// before the run.
func (r *result) wait(ctx context.Context, cfg config, board *board, before boardCounts, q *queue, placed <-chan error, sale *saleProcess) error {
	start := time.Now()
	deadline := start.Add(cfg.window + time.Minute)
	queueDone := false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-placed:
			if err != nil {
				return err
			}
			queueDone, placed = true, nil
		case <-tick.C:
		}
		if err := sale.exited(); err != nil {
			return err
		}
		c, err := board.counts(ctx)
		if err != nil {
			return err
		}
		// This run's orders (and those an interrupted run left open).
		confirmed, rejected := c.confirmed-before.confirmed, c.rejected-before.rejected
		ended := confirmed + rejected
		cfg.progress.status("placed %d/%d, ended %d (%d confirmed, %d rejected), %s",
			c.placed-before.placed, cfg.orders, ended, confirmed, rejected, time.Since(start).Round(100*time.Millisecond))
		// Kill the sale once half the clients' messages have taken effect
		// and it has ended some orders: orders are still arriving, and
		// sales are at every stage.
		if applied := int(q.applied.Load()); cfg.kill && r.killedAt < 0 && applied*2 >= q.stats.Messages && ended > 0 {
			killed, err := sale.restart()
			if err != nil {
				return err
			}
			r.killedAt, r.killedEnded = applied, ended
			cfg.progress.printf("killed the sale process (pid %d) with SIGKILL, %d of %d client messages in, %d orders ended; restarted it (pid %d)\n",
				killed, applied, q.stats.Messages, ended, sale.pid())
		}
		// Every order ended: this run's, and any that an interrupted run
		// left open.
		if queueDone && c.placed-before.placed == cfg.orders && c.confirmed+c.rejected == c.placed {
			return nil
		}
		if time.Now().After(deadline) {
			return errStuck
		}
	}
}

// stuck explains the first orders that did not end in time.
func stuck(ctx context.Context, b *board, s *sale) error {
	ids, err := b.open(ctx, 3)
	if err != nil {
		return err
	}
	msg := errStuck.Error() + ":"
	for _, id := range ids {
		why, err := s.explain(ctx, id)
		if err != nil {
			why = err.Error()
		}
		msg += fmt.Sprintf("\n  %s: %s", id, why)
	}
	return errors.New(msg)
}
