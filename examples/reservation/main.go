// Command reservation is Cairn's flagship example: a ticket sale in which
// Order, SeatReservation and Payment aggregates, which never handle each
// other's events, are coordinated by a Sale saga, on the embedded SQLite
// store.
//
// Customers' clients place orders, and authorize their payments, through a
// queue that sends messages twice, redelivers them after a worker crashed,
// and reorders them. The sale runs in a process of its own, which the
// program kills with SIGKILL once mid-way and restarts. When every order
// has ended, it reads the whole history back, checks that every order
// ended as its inputs dictate and every command took effect once, and
// prints a summary.
//
// With -trace it installs the OpenTelemetry SDK in each of its processes
// and writes their spans, one JSON line each, to files beside the path it
// names (docs/observability.md draws one order's trace from them).
//
// With -v2 it runs version 2 of the code on the same data: payments belong
// to a Finance aggregate, and version 1's history (its payments, and the
// sales' state) is read through upcasters.
//
//	go run ./examples/reservation [-data data] [-orders 300]
//	go run ./examples/reservation -v2 [-orders 100]
//	go run ./examples/reservation -store postgres://localhost/app?schema=reservation
//	go run ./examples/reservation -trace trace/reservation.jsonl -orders 20
//	go run ./examples/reservation admin --store sqlite:///path/to/data/reservation.db sagas ls
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"
)

func main() {
	if os.Getenv(roleEnv) == roleSale {
		if err := serveSale(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "sale:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "admin" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		code := admin(ctx, os.Args[2:])
		stop()
		os.Exit(code)
	}
	cfg := config{out: os.Stdout}
	flag.StringVar(&cfg.data, "data", "data", "folder of the SQLite store (unless -store names one) and of the saved history; created when missing, added to when present")
	flag.StringVar(&cfg.store, "store", "", "the store's URL, sqlite:///path/events.db or postgres://host/db?schema=name; default the SQLite file in -data")
	flag.IntVar(&cfg.orders, "orders", 300, "orders to place")
	flag.IntVar(&cfg.clients, "clients", 8, "clients placing orders at once")
	flag.IntVar(&cfg.workers, "workers", 8, "queue workers dispatching the clients' messages")
	flag.DurationVar(&cfg.pace, "pace", 40*time.Millisecond, "time between two orders of one client")
	flag.DurationVar(&cfg.window, "payment-window", defaultWindow, "how long a sale waits for its payment")
	flag.Uint64Var(&cfg.seed, "seed", 0, "seed of the orders and of the queue's faults; 0 for a new one")
	flag.BoolVar(&cfg.kill, "kill", true, "kill the sale process once mid-way, and restart it")
	flag.StringVar(&cfg.trace, "trace", "", "write every process's spans (and metrics) as JSON lines to files beside this path: the path itself for this process, <name>.sale-<n>.jsonl for the sale processes; unset, nothing is traced")
	useV2 := flag.Bool("v2", false, "run version 2 of the code: payments belong to a Finance aggregate")
	flag.Parse()
	cfg.model = modelV1
	if *useV2 {
		cfg.model = modelV2
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	info, err := os.Stderr.Stat()
	cfg.progress = newProgress(os.Stderr, err == nil && info.Mode()&os.ModeCharDevice != 0)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var tel *otelSDK
	if cfg.trace != "" {
		if tel, err = startTelemetry(cfg.trace, roleParent, false); err != nil {
			fmt.Fprintln(os.Stderr, "reservation:", err)
			os.Exit(2)
		}
		cfg.tracerProvider, cfg.meterProvider = tel.tracerProvider(), tel.meterProvider()
	}
	res, err := run(ctx, cfg)
	// Whatever the run's end, write what the providers hold before exiting.
	if terr := tel.shutdown(context.Background()); terr != nil {
		fmt.Fprintln(os.Stderr, "reservation: -trace:", terr)
	}
	if err != nil {
		cfg.progress.done()
		fmt.Fprintln(os.Stderr, "reservation:", err)
		os.Exit(1)
	}
	res.print(cfg.out)
}
