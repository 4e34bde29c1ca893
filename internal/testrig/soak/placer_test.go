package soak_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/examples/reservation/domain"
)

// The client's side of the soak: orders placed at a steady rate through
// the parent's own command bus, each with its message ID, retried under
// that ID until the bus acknowledges it.

// orderInput is order i's ID and inputs: a fixed function of i, so that
// the check at the end needs no record of them. About one order in five
// asks for too many seats and one in eleven pays too much; no amount is
// a multiple of 7, the payment that only the 15-minute deadline ends
// (reservation.Expect), so that every order ends on its own messages and
// the drain does not wait for wall-clock deadlines. The deadlines are
// still set and cancelled by every reserved order.
func orderInput(i int) (id string, seats int, amountCents int64) {
	h := uint64(i)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	seats = 1 + int(h%(domain.MaxSeats+2))
	amountCents = 100 + int64((h>>16)%1000)
	if amountCents%7 == 0 {
		amountCents++
	}
	return fmt.Sprintf("o%07d", i), seats, amountCents
}

// placement is what the placer did.
type placement struct {
	// Attempted counts the orders the placer began; Acked[i] says the bus
	// acknowledged order i. Dispatches counts the Dispatch calls, Errors
	// those that failed (and were tried again).
	Attempted  int
	Acked      []bool
	Dispatches int64
	Errors     int64
	// LastError is the last Dispatch error seen.
	LastError string
	// Took is how long placing took, from the first order to the last
	// acknowledgement.
	Took time.Duration
}

// Acknowledged counts the acknowledged orders.
func (p placement) Acknowledged() int {
	n := 0
	for _, ok := range p.Acked {
		if ok {
			n++
		}
	}
	return n
}

// placeOrders places orders at rate per second for d, through workers
// goroutines. An order whose dispatch fails is tried again under its
// message ID, up to 10 times; one still failing stays unacknowledged.
func placeOrders(ctx context.Context, bus *command.Bus, rate float64, d time.Duration, workers int) placement {
	n := int(rate * d.Seconds())
	p := placement{Acked: make([]bool, n)}
	var dispatches, failures atomic.Int64
	var lastErr atomic.Value
	jobs := make(chan int, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				id, seats, amount := orderInput(i)
				msg := command.Message{ID: "place-" + id, Command: domain.PlaceOrder{OrderID: id, Seats: seats, AmountCents: amount}}
				for try := 0; try < 10 && ctx.Err() == nil; try++ {
					dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					_, err := bus.Dispatch(dctx, msg)
					cancel()
					dispatches.Add(1)
					if err == nil {
						p.Acked[i] = true // only this worker writes index i
						break
					}
					failures.Add(1)
					lastErr.Store(err.Error())
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	began := time.Now()
	for i := range n {
		// Order i is due at i/rate: a slow moment is caught up, so the rate
		// over the run is the one asked for if the system keeps up.
		if wait := time.Until(began.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			break
		}
		jobs <- i
		p.Attempted++
	}
	close(jobs)
	wg.Wait()
	p.Took = time.Since(began)
	p.Dispatches, p.Errors = dispatches.Load(), failures.Load()
	if s, ok := lastErr.Load().(string); ok {
		p.LastError = s
	}
	return p
}
