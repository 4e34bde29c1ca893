package cli

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// streamRow is a stream in streams ls --json.
type streamRow struct {
	Stream       string              `json:"stream"`
	Events       uint64              `json:"events"`
	LastVersion  uint64              `json:"last_version"`
	LastPosition eventstore.Position `json:"last_position"`
}

func (a *app) streamsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "streams",
		Short: "List, read and follow streams",
	}
	c.AddCommand(a.streamsLs(), a.streamsRead(), a.streamsTail())
	return c
}

func (a *app) streamsLs() *cobra.Command {
	var prefix, after string
	var types []string
	var limit int
	c := &cobra.Command{
		Use:   "ls",
		Short: "List streams, with their last version and position",
		Long: `List streams in name order, with how many events each holds, its last version
and the position of its last event. --prefix keeps the streams whose names start
with it (order- for the orders, saga:sale- for the sale saga's instances);
--type keeps the streams that hold an event of that type, which reads the log.
--after resumes a listing after the stream it names; --limit bounds it.`,
		Args: args(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := notNegative("--limit", limit); err != nil {
				return err
			}
			store, err := a.openStore(ctx, ReadOnly)
			if err != nil {
				return err
			}
			var rows []streamRow
			var list iter.Seq2[storekit.StreamInfo, error]
			if len(types) > 0 {
				list = streamsOfTypes(ctx, store, prefix, after, types)
			} else {
				cat, err := catalogOf(store)
				if err != nil {
					return err
				}
				list = cat.Streams(ctx, prefix, after)
			}
			for s, err := range list {
				if err != nil {
					return err
				}
				rows = append(rows, streamRow{s.Name, s.LastVersion + 1, s.LastVersion, s.LastPosition})
				if limit > 0 && len(rows) == limit {
					break
				}
			}
			return a.emit(orEmpty(rows), func(t *tableWriter) {
				t.row("STREAM", "EVENTS", "LAST VERSION", "LAST POSITION")
				for _, r := range rows {
					t.row(r.Stream, u64(r.Events), u64(r.LastVersion), position(r.LastPosition))
				}
			})
		},
	}
	c.Flags().StringVar(&prefix, "prefix", "", "only streams whose names start with this")
	c.Flags().StringVar(&after, "after", "", "only streams whose names sort after this (to page)")
	c.Flags().StringSliceVar(&types, "type", nil, "only streams holding an event of this type (repeat, or comma-separated)")
	c.Flags().IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	return c
}

// streamsOfTypes lists the streams holding events of types, by reading
// the log, since no store indexes streams by type. It keeps a line per
// stream found, not per event.
func streamsOfTypes(ctx context.Context, store eventstore.Store, prefix, after string, types []string) iter.Seq2[storekit.StreamInfo, error] {
	return func(yield func(storekit.StreamInfo, error) bool) {
		filter := eventstore.Filter{Types: types}
		if prefix != "" {
			filter.StreamPrefixes = []string{prefix}
		}
		found := map[string]storekit.StreamInfo{}
		for e, err := range store.ReadAll(ctx, eventstore.Start, filter) {
			if err != nil {
				yield(storekit.StreamInfo{}, err)
				return
			}
			if e.StreamID > after {
				found[e.StreamID] = storekit.StreamInfo{Name: e.StreamID, LastVersion: e.Version, LastPosition: e.Position}
			}
		}
		names := make([]string, 0, len(found))
		for n := range found {
			names = append(names, n)
		}
		for _, n := range sorted(names) {
			// What the log said is the last event of a type; the stream's
			// own last event is what ls reports.
			last, err := lastEvent(ctx, store, n)
			if err != nil {
				yield(storekit.StreamInfo{}, err)
				return
			}
			if !yield(storekit.StreamInfo{Name: n, LastVersion: last.Version, LastPosition: last.Position}, nil) {
				return
			}
		}
	}
}

func lastEvent(ctx context.Context, store eventstore.Store, stream string) (eventstore.Event, error) {
	for e, err := range store.ReadStream(ctx, stream, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}) {
		return e, err
	}
	return eventstore.Event{}, fmt.Errorf("stream %q: %w", stream, errNotFound)
}

var errNotFound = errors.New("not found")

func (a *app) streamsRead() *cobra.Command {
	var from string
	var limit int
	var backward bool
	var types []string
	var ev eventFlags
	c := &cobra.Command{
		Use:   "read <stream>",
		Short: "Print the events of one stream",
		Long: `Print the events of one stream in version order (--backward: newest first),
from version --from (with --backward, "end" is the last event), at most --limit.
--type keeps the events of those types. --data prints each event's data and
metadata; --decode shows the data as the service's code reads it today, upcast
(in a service's binary).`,
		Args: args(1, "stream"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			if err := notNegative("--limit", limit); err != nil {
				return err
			}
			stream := argv[0]
			opts := eventstore.ReadOptions{Backward: backward, Limit: limit}
			switch {
			case from == "end" || (from == "" && backward):
				opts.From = eventstore.End
			case from != "":
				v, err := strconv.ParseUint(from, 10, 64)
				if err != nil {
					return usagef("--from %q: a version (0, 1, 2, ...) or end", from)
				}
				opts.From = v
			}
			if len(types) > 0 {
				opts.Limit = 0 // the limit counts what is printed
			}
			store, err := a.openStore(ctx, ReadOnly)
			if err != nil {
				return err
			}
			keep := typeSet(types)
			events := func(yield func(eventstore.Event, error) bool) {
				n := 0
				for e, err := range store.ReadStream(ctx, stream, opts) {
					if err == nil && !keep(e.Type) {
						continue
					}
					if !yield(e, err) || err != nil {
						return
					}
					if n++; limit > 0 && n == limit {
						return
					}
				}
			}
			return a.printEvents(ctx, events, ev, false)
		},
	}
	c.Flags().StringVar(&from, "from", "", `the version to start at ("end" for the last)`)
	c.Flags().IntVar(&limit, "limit", 0, "print at most this many (0: all)")
	c.Flags().BoolVar(&backward, "backward", false, "newest first")
	c.Flags().StringSliceVar(&types, "type", nil, "only events of this type (repeat, or comma-separated)")
	ev.register(c)
	return c
}

func (a *app) streamsTail() *cobra.Command {
	var prefixes, types []string
	var after string
	var fromStart, follow bool
	var limit int
	var ev eventFlags
	c := &cobra.Command{
		Use:   "tail [stream]",
		Short: "Print the newest events of the log, or of one stream, and follow new ones",
		Long: `Print the last --limit events (default 10) of the whole log in global order,
or of one stream, and with --follow keep printing new events as they are
committed, until interrupted. --prefix and --type keep the events of those
stream prefixes and types (repeat either). --after POSITION starts after a
position (as printed, major:minor), --from-start at the beginning.`,
		Args: func(cmd *cobra.Command, argv []string) error {
			if len(argv) > 1 {
				return usagef("%s takes at most one stream, got %d arguments", cmd.CommandPath(), len(argv))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			filter := eventstore.Filter{Types: types, StreamPrefixes: prefixes}
			if err := notNegative("--limit", limit); err != nil {
				return err
			}
			stream := ""
			if len(argv) == 1 {
				if argv[0] == "" {
					return usagef("the stream to tail is named \"\": name a stream, or none to tail the whole log")
				}
				if len(prefixes) > 0 {
					return usagef("streams tail takes a stream or --prefix, not both")
				}
				stream = argv[0]
				filter.StreamPrefixes = []string{stream}
			}
			if err := filter.Validate(); err != nil {
				return &UsageError{Msg: "--prefix or --type", Err: err}
			}
			store, err := a.openStore(ctx, ReadOnly)
			if err != nil {
				return err
			}
			start := eventstore.Start
			switch {
			case after != "":
				start, err = eventstore.ParsePosition(after)
				if err != nil {
					return &UsageError{Msg: fmt.Sprintf("--after %q: a position as printed (major:minor)", after), Err: err}
				}
			case !fromStart:
				if start, err = tailStart(ctx, store, stream, filter, limit); err != nil {
					return err
				}
			}
			read := store.ReadAll
			if follow {
				read = store.Subscribe
			}
			events := func(yield func(eventstore.Event, error) bool) {
				for e, err := range read(ctx, start, filter) {
					if err == nil && stream != "" && e.StreamID != stream {
						continue // another stream with the same prefix
					}
					if follow && err != nil && ctx.Err() != nil {
						return // interrupted: the end of a follow, not a failure
					}
					if !yield(e, err) || err != nil {
						return
					}
				}
			}
			return a.printEvents(ctx, events, ev, follow)
		},
	}
	c.Flags().StringSliceVar(&prefixes, "prefix", nil, "only streams starting with this (repeat, or comma-separated)")
	c.Flags().StringSliceVar(&types, "type", nil, "only events of this type (repeat, or comma-separated)")
	c.Flags().StringVar(&after, "after", "", "start after this position (major:minor)")
	c.Flags().BoolVar(&fromStart, "from-start", false, "start at the first event")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until interrupted")
	c.Flags().IntVarP(&limit, "limit", "n", 10, "how many of the newest events to start with")
	ev.register(c)
	return c
}

// tailStart finds the position after which the last limit matching events
// lie. A stream is read backward; the log has no backward read, so it is
// read forward once, keeping the last limit positions.
func tailStart(ctx context.Context, store eventstore.Store, stream string, filter eventstore.Filter, limit int) (eventstore.Position, error) {
	if limit <= 0 {
		head, err := headOf(ctx, store)
		return head, err
	}
	if stream != "" {
		var first eventstore.Event
		n := 0
		for e, err := range store.ReadStream(ctx, stream, eventstore.ReadOptions{From: eventstore.End, Backward: true}) {
			if err != nil {
				return eventstore.Start, err
			}
			if !filter.Match(&e) {
				continue
			}
			first = e
			if n++; n == limit {
				break
			}
		}
		if n == 0 {
			return headOf(ctx, store)
		}
		return justBefore(ctx, store, first)
	}
	// The last limit events, and the one before them, whose position is
	// where to start. The ring grows with what is read, never to more
	// than the log holds, whatever -n says.
	var ring []eventstore.Position
	n := 0
	for e, err := range store.ReadAll(ctx, eventstore.Start, filter) {
		if err != nil {
			return eventstore.Start, err
		}
		if len(ring) <= limit {
			ring = append(ring, e.Position)
		} else {
			ring[n%len(ring)] = e.Position
		}
		n++
	}
	if n <= limit {
		return eventstore.Start, nil
	}
	return ring[(n-limit-1)%len(ring)], nil
}

// justBefore returns a position after which e is the first event of its
// stream: the position of the event before it in the stream (the events of
// one stream are in global order).
func justBefore(ctx context.Context, store eventstore.Store, e eventstore.Event) (eventstore.Position, error) {
	if e.Version == 0 {
		return eventstore.Start, nil
	}
	for prev, err := range store.ReadStream(ctx, e.StreamID, eventstore.ReadOptions{From: e.Version - 1, Backward: true, Limit: 1}) {
		if err != nil {
			return eventstore.Start, err
		}
		return prev.Position, nil
	}
	return eventstore.Start, nil
}

// headOf returns the store's newest position: from the store when it keeps
// one, else by reading the log.
func headOf(ctx context.Context, store eventstore.Store) (eventstore.Position, error) {
	if h, ok := store.(interface {
		Head(context.Context) (eventstore.Position, error)
	}); ok {
		return h.Head(ctx)
	}
	var last eventstore.Position
	for e, err := range store.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return eventstore.Start, err
		}
		last = e.Position
	}
	return last, nil
}

func typeSet(types []string) func(string) bool {
	if len(types) == 0 {
		return func(string) bool { return true }
	}
	set := make(map[string]bool, len(types))
	for _, t := range types {
		set[strings.TrimSpace(t)] = true
	}
	return func(t string) bool { return set[t] }
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

// orEmpty makes a nil slice an empty one, so that --json prints [] for
// nothing found, never null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// notNegative refuses a negative count given to flag: "at most -1" is a
// mistake, not a request for everything.
func notNegative(flag string, n int) error {
	if n < 0 {
		return usagef("%s %d: a count is 0 (no limit) or more", flag, n)
	}
	return nil
}
