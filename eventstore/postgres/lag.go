package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// Lag is how far the store's read horizon is behind its newest committed
// events. Subscribers read only below the horizon, the oldest transaction
// still running in the whole cluster (any database, any table), so that no
// transaction can commit events behind them. A long-running transaction
// that has written anything holds the horizon back: events committed after
// it began wait, unread but never lost, until it ends.
type Lag struct {
	// Horizon is the position through which subscribers can read now.
	Horizon eventstore.Position
	// Pending counts committed events above the horizon, which subscribers
	// cannot read yet.
	Pending int64
	// Delay is how long the oldest pending event has waited since it was
	// written; zero when none is pending.
	Delay time.Duration
	// Holder is the oldest running transaction that has a transaction ID,
	// the one holding the horizon back; nil when none is running. Prepared
	// (two-phase) transactions also hold the horizon back and are not
	// listed here: see pg_prepared_xacts.
	Holder *Holder
}

// Holder describes a running transaction that holds the horizon back.
type Holder struct {
	// PID is the backend's process ID, for pg_stat_activity and
	// pg_terminate_backend.
	PID int32
	// Age is how long the transaction has been running.
	Age time.Duration
	// State is the backend's state, such as "idle in transaction".
	State string
}

// Lag measures how far subscribers are held back. Poll it to alert on a
// growing Delay; Holder names the transaction to look at.
func (s *Store) Lag(ctx context.Context) (Lag, error) {
	if err := s.checkOpen(); err != nil {
		return Lag{}, err
	}
	var (
		lag   Lag
		xmin  uint64
		delay *float64
		pid   *int32
		age   *float64
		state *string
	)
	err := s.pool.QueryRow(ctx, s.sql.lag).Scan(&xmin, &lag.Pending, &delay, &pid, &age, &state)
	if err != nil {
		return Lag{}, s.closedOr(fmt.Errorf("postgres: measuring subscriber lag: %w", err))
	}
	lag.Horizon = eventstore.Position{Major: xmin - 1, Minor: math.MaxUint64}
	if delay != nil {
		lag.Delay = seconds(*delay)
	}
	if pid != nil {
		lag.Holder = &Holder{PID: *pid}
		if age != nil {
			lag.Holder.Age = seconds(*age)
		}
		if state != nil {
			lag.Holder.State = *state
		}
	}
	return lag, nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
