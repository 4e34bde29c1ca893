package saga

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
)

// eventsFilter is what the runner's events consumers read: the stored
// types the saga maps, older names that upcasters rename included.
func (r *Runner[S]) eventsFilter() eventstore.Filter {
	return eventstore.Filter{Types: r.e.t.eventTypes()}
}

// recordsFilter is what the outbox consumers of saga type name read: the
// step records of its instances' streams.
func recordsFilter(name string) eventstore.Filter {
	return eventstore.Filter{Types: []string{recordType}, StreamPrefixes: []string{StreamPrefix + name + "-"}}
}

// ConsumerFilters returns the filter each consumer the runner runs reads
// the log with, by consumer name (see [Runner.Consumers]): each segment's
// events consumer reads the stored types the saga maps, each outbox the
// saga's step records. A consumer's checkpoint stays at the last event its
// filter selected, so the events it has left are those after its
// checkpoint that its filter selects: an operator's tool (cairn doctor)
// counts them with it. With [RunnerOptions.ExternalEvents] the events
// consumers are not run, so they are not in the map; nor is "saga:<type>"
// in a runner of several segments, where it keeps only dead letters and
// reads nothing. The map and its slices are the caller's.
func (r *Runner[S]) ConsumerFilters() map[string]eventstore.Filter {
	out := make(map[string]eventstore.Filter, 2*r.segments)
	for k := range r.segments {
		events, outbox := r.segmentNames(k)
		if !r.opts.ExternalEvents {
			out[events] = r.eventsFilter()
		}
		out[outbox] = recordsFilter(r.e.t.name)
	}
	return out
}

// segmentSuffix is the "#k/n" that ends the consumer names of a runner of
// several segments.
var segmentSuffix = regexp.MustCompile(`#\d+/\d+$`)

// StoredConsumerFilters returns the filters of those of consumers (names
// as the store lists them) that are saga runners' consumers, as far as
// store tells them, for a tool that has no runner (the bare cairn binary):
//
//   - an outbox ("saga:<type>:outbox", "saga:<type>#k/n:outbox") reads
//     the step records of the type's instances;
//   - an events consumer ("saga:<type>", "saga:<type>#k/n") reads the
//     stored types that the subscription record of its type names, which
//     the last runner to start wrote (a type without one is left out);
//     "saga:<type>" is left out when consumers hold the type's segmented
//     names too, as a segmented runner keeps only dead letters under it
//     (or, after a change from one segment, a checkpoint nothing moves).
//
// A name that is no saga consumer's, or whose subscription record cannot
// be read, is left out: its filter is unknown. The error is the store's.
func StoredConsumerFilters(ctx context.Context, store eventstore.Store, consumers []string) (map[string]eventstore.Filter, error) {
	segmented := map[string]bool{}
	for _, name := range consumers {
		base := strings.TrimSuffix(name, ":outbox")
		if segmentSuffix.MatchString(base) {
			segmented[segmentSuffix.ReplaceAllString(base, "")] = true
		}
	}
	read := map[string]*eventstore.Filter{} // by saga type, nil when unknown
	out := map[string]eventstore.Filter{}
	for _, name := range consumers {
		base, outbox := strings.CutSuffix(name, ":outbox")
		typ, ok := strings.CutPrefix(segmentSuffix.ReplaceAllString(base, ""), StreamPrefix)
		if !ok || typ == "" || strings.Contains(typ, "-") {
			continue // not a saga's: a type's name has no "-"
		}
		if outbox {
			out[name] = recordsFilter(typ)
			continue
		}
		if base == StreamPrefix+typ && segmented[base] {
			continue
		}
		f, seen := read[typ]
		if !seen {
			sub, _, found, err := lastSubscription(ctx, store, subscriptionStream(typ))
			switch {
			case errors.Is(err, eventstore.ErrCorrupt):
			case err != nil:
				return nil, err
			case found:
				f = &eventstore.Filter{Types: sub.Types}
			}
			read[typ] = f
		}
		if f != nil {
			out[name] = eventstore.Filter{Types: append([]string(nil), f.Types...)}
		}
	}
	return out, nil
}
