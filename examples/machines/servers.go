package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
)

// request is one command as a machine sends it: with an ID of its own,
// which it keeps when it sends the request again after a timeout.
type request struct {
	id  string
	cmd command.Command
}

// cluster is the service behind the load balancer: several servers, each
// with its own command bus (and cache of machines), on one event store.
// Nothing routes a machine to "its" server, and nothing orders requests:
// each machine's stream version decides which decision is stored.
type cluster struct {
	servers []*command.Bus
	next    atomic.Uint64

	conflicts atomic.Int64 // decisions made again after a version conflict
	planned   atomic.Int64 // stop requests that arrived while the job ran

	mu                   sync.Mutex
	outcomes             map[string]string // request ID -> "accepted" or the rejection's reason
	accepted, duplicates int
	rejected             map[error]int // reason -> requests
}

func newCluster(store eventstore.Store, reg *codec.Registry, machines *aggregate.Type[Machine, *Machine], servers int, logger *slog.Logger) (*cluster, error) {
	c := &cluster{outcomes: make(map[string]string), rejected: make(map[error]int)}
	observe := command.Observing(func(_ context.Context, o command.Observation) {
		if o.Result.Attempts > 1 {
			c.conflicts.Add(int64(o.Result.Attempts - 1))
		}
	})
	for range servers {
		bus := command.New(store, reg, command.Options{Middleware: []command.Middleware{observe}, Logger: logger})
		err := errors.Join(
			command.Route[StartJob](bus, machines),
			command.Route[PieceDone](bus, machines),
			command.Route[StopForMaintenance](bus, machines),
		)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, bus)
	}
	return c, nil
}

// send is the load balancer: round robin over the servers, whatever the
// machine. A rejection is an answer (the machine shows it to its operator);
// a server that kept losing the race for a machine answers "busy", and the
// machine sends the same request again.
func (c *cluster) send(ctx context.Context, r request) error {
	for {
		bus := c.servers[c.next.Add(1)%uint64(len(c.servers))]
		res, err := bus.Dispatch(ctx, command.Message{ID: r.id, Command: r.cmd})
		if errors.Is(err, command.ErrContention) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		var refused *TransitionError
		switch {
		case errors.As(err, &refused):
			c.record(r.id, refused.Err.Error(), refused.Err, false)
		case err != nil:
			return fmt.Errorf("request %s (%T): %w", r.id, r.cmd, err)
		default:
			c.record(r.id, "accepted", nil, res.Duplicate)
			for _, e := range res.Events {
				if _, ok := e.(MaintenanceRequested); ok && !res.Duplicate {
					c.planned.Add(1)
				}
			}
		}
		return nil
	}
}

// record keeps one outcome per request ID; a request sent again must get the
// same one.
func (c *cluster) record(id, outcome string, reason error, duplicate bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if duplicate {
		c.duplicates++
	}
	if earlier, ok := c.outcomes[id]; ok {
		if earlier != outcome {
			c.outcomes[id] = fmt.Sprintf("INCONSISTENT: %s, then %s", earlier, outcome)
		}
		return
	}
	c.outcomes[id] = outcome
	if reason != nil {
		c.rejected[reason]++
	} else {
		c.accepted++
	}
}
