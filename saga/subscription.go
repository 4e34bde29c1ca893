package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/trusted"
)

// subscriptionType is the type of the records in which a saga type keeps
// the stored type names its subscription reads.
const subscriptionType = "cairn.saga.subscription"

// subscriptionStream is where saga type t keeps what its subscription
// reads: "saga:<name>:subscription". Saga type names have no "-", so it
// has none, and no saga type's instance streams (all "saga:<name>-<id>")
// include it.
func (t *Type[S]) subscriptionStream() string { return subscriptionStream(t.name) }

// subscriptionStream is saga type name's subscription stream.
func subscriptionStream(name string) string { return StreamPrefix + name + ":subscription" }

// subscription is what a saga's subscription read when a runner started.
type subscription struct {
	Types []string `json:"types"`
	// Versions are the schema versions at which the code registered the
	// types it mapped, by name: what it stored them at.
	Versions map[string]uint32 `json:"versions,omitempty"`
}

// checkSubscription compares the stored type names that the saga's
// subscription read the last time a runner started with what this code
// reads. A name it read that this code does not read at all is a type
// renamed without its rename step, or removed: its stored events would
// pass the saga by in silence, and the events checkpoint would move past
// them for good, so no instance would ever take them. Run and CatchUp
// refuse to start then, with a [*SetupError] naming the types; otherwise
// the names this code reads are recorded for the next start. Without a
// record yet (a new saga, or one whose runners predate it), the types the
// instances' step records took are what it read. It runs once per runner,
// until it succeeds.
func (r *Runner[S]) checkSubscription(ctx context.Context) error {
	r.subscribed.Lock()
	defer r.subscribed.Unlock()
	if r.subscribedOK || r.opts.ExternalEvents {
		return nil // with external events, no subscription passes anything by
	}
	reads := r.e.t.eventTypes()
	slices.Sort(reads)
	versions := r.e.t.mappedVersions()
	stream := r.e.t.subscriptionStream()
	for attempt := 0; ; attempt++ {
		last, version, found, err := r.lastSubscription(ctx, stream)
		if err != nil {
			return err
		}
		read := last.Types
		if !found {
			// Runners that predate the subscription record, or none: what
			// the instances took is what the subscription read.
			if read, err = r.recordedTypes(ctx); err != nil {
				return err
			}
		}
		var lost []string
		for _, name := range read {
			if slices.Contains(reads, name) || r.e.t.reg.Reads(name, last.Versions[name]) {
				continue
			}
			// A name the store holds no event of (a type a newer release
			// mapped but never stored, before a rollback) loses nothing.
			held, err := r.storeHolds(ctx, name)
			if err != nil {
				return err
			}
			if held {
				lost = append(lost, name)
			}
		}
		if len(lost) > 0 {
			r.forgotten.add(lost...)
			r.e.log.ErrorContext(ctx, "saga: the subscription read stored event types that this code does not read; not starting",
				slog.String("saga", r.e.t.name), slog.Any("types", lost))
			return &SetupError{Saga: r.e.t.name, Reason: fmt.Sprintf("its subscription read stored events of type %s, which the store holds and this code does not read, "+
				"so they would pass the saga by for good: a type renamed without its upcast.Rename step? Register the rename, "+
				"or upcast.Drop the type if the saga no longer needs its events", strings.Join(quoted(lost), ", "))}
		}
		if found && slices.Equal(last.Types, reads) && maps.Equal(last.Versions, versions) {
			break
		}
		data, err := json.Marshal(subscription{Types: reads, Versions: versions})
		if err != nil {
			return err
		}
		expected := eventstore.NoStream
		if found {
			expected = eventstore.Exact(version)
		}
		_, err = r.e.store.Append(trusted.Writer(ctx), stream, expected,
			eventstore.EventData{Type: subscriptionType, SchemaVersion: 1, Data: data})
		if err == nil {
			break
		}
		if !errors.Is(err, eventstore.ErrWrongVersion) || attempt >= 3 {
			return fmt.Errorf("saga %q: recording what its subscription reads in %s: %w", r.e.t.name, stream, err)
		}
		// Another runner started meanwhile: check against what it recorded.
	}
	r.subscribedOK = true
	return nil
}

// storeHolds reports whether the store holds an event of type name.
func (r *Runner[S]) storeHolds(ctx context.Context, name string) (bool, error) {
	for _, err := range r.e.store.ReadAll(ctx, eventstore.Start, eventstore.Filter{Types: []string{name}}) {
		return err == nil, err
	}
	return false, nil
}

// mappedVersions returns the schema version at which the codec registers
// each event type the saga maps, by name.
func (t *Type[S]) mappedVersions() map[string]uint32 {
	out := make(map[string]uint32, len(t.events))
	for _, m := range t.events {
		if _, v, ok := t.reg.NameOfType(m.goType); ok {
			out[m.name] = v
		}
	}
	return out
}

// lastSubscription reads the latest record of stream, if any.
func (r *Runner[S]) lastSubscription(ctx context.Context, stream string) (subscription, uint64, bool, error) {
	return lastSubscription(ctx, r.e.store, stream)
}

// lastSubscription reads the latest record of stream in store, if any: a
// function of its own so that [StoredConsumerFilters] reads it without a
// runner.
func lastSubscription(ctx context.Context, store eventstore.Store, stream string) (subscription, uint64, bool, error) {
	for ev, err := range store.ReadStream(ctx, stream, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}) {
		if err != nil {
			return subscription{}, 0, false, err
		}
		var s subscription
		if ev.Type != subscriptionType || ev.SchemaVersion != 1 {
			return subscription{}, 0, false, corrupt(ev.StreamID, ev.Version, fmt.Sprintf("%s (schema %d) is not a saga subscription record", ev.Type, ev.SchemaVersion), nil)
		}
		if err := json.Unmarshal(ev.Data, &s); err != nil {
			return subscription{}, 0, false, corrupt(ev.StreamID, ev.Version, "undecodable saga subscription record", err)
		}
		return s, ev.Version, true, nil
	}
	return subscription{}, 0, false, nil
}

// quoted returns names, each quoted.
func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}
