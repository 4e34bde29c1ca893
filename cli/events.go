package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
)

// eventRow is an event as the event commands print it with --json: one
// JSON object per line, so that a follow streams and a long read never
// waits to be one document.
type eventRow struct {
	Position      eventstore.Position `json:"position"`
	Stream        string              `json:"stream"`
	Version       uint64              `json:"version"`
	ID            string              `json:"id"`
	Type          string              `json:"type"`
	SchemaVersion uint32              `json:"schema_version"`
	RecordedAt    time.Time           `json:"recorded_at"`
	Metadata      eventstore.Metadata `json:"metadata"`
	// Data is the stored data when it is JSON; DataBase64 holds it
	// otherwise. Neither is printed without --data.
	Data       json.RawMessage `json:"data,omitempty"`
	DataBase64 []byte          `json:"data_base64,omitempty"`
	// Decoded holds the values the service's code reads from the event
	// today (upcast), with --decode in a service's binary.
	Decoded []decodedRow `json:"decoded,omitempty"`
}

type decodedRow struct {
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// eventRowOf is e as the commands print it, with its data when withData
// (as JSON when it is JSON, else base64).
func eventRowOf(e eventstore.Event, withData bool) eventRow {
	row := eventRow{
		Position: e.Position, Stream: e.StreamID, Version: e.Version, ID: e.ID.String(),
		Type: e.Type, SchemaVersion: e.SchemaVersion, RecordedAt: e.RecordedAt, Metadata: e.Metadata,
	}
	if withData {
		if json.Valid(e.Data) {
			row.Data = json.RawMessage(e.Data)
		} else {
			row.DataBase64 = e.Data
		}
	}
	return row
}

// eventFlags are the flags of every command that prints events.
type eventFlags struct {
	data, decode bool
}

func (f *eventFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&f.data, "data", false, "print each event's data and metadata")
	c.Flags().BoolVar(&f.decode, "decode", false, "print each event's data decoded and upcast by the service's code (a service's binary only)")
}

// printEvents prints events as they come: JSON lines, or a table flushed
// as it goes when following (a follow has no end to align columns at).
func (a *app) printEvents(ctx context.Context, events iter.Seq2[eventstore.Event, error], f eventFlags, live bool) error {
	var svc *Service
	if f.decode {
		var err error
		if svc, _, err = a.serviceOn(ctx, "--decode"); err != nil {
			return err
		}
		if svc.Registry == nil {
			return usagef("--decode: the service gave no codec registry")
		}
	}
	enc := json.NewEncoder(a.stdout)
	t := &tableWriter{w: tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)}
	if !a.asJSON {
		head := []string{"POSITION", "STREAM", "VERSION", "TYPE", "RECORDED"}
		if f.data || f.decode {
			head = append(head, "DATA")
		}
		t.row(head...)
	}
	for e, err := range events {
		if err != nil {
			_ = t.w.Flush()
			return err
		}
		row := eventRowOf(e, f.data)
		if f.decode {
			values, err := svc.Registry.Decode(e)
			if err != nil {
				return fmt.Errorf("decoding %s version %d (%s): %w", e.StreamID, e.Version, e.Type, err)
			}
			for _, v := range values {
				row.Decoded = append(row.Decoded, decodedRow{Type: v.Event.Type, Value: v.Value})
			}
		}
		if a.asJSON {
			if err := enc.Encode(row); err != nil {
				return err
			}
			continue
		}
		cells := []string{position(row.Position), row.Stream, u64(row.Version), row.Type, when(row.RecordedAt)}
		if f.data || f.decode {
			cells = append(cells, dataCell(row))
		}
		t.row(cells...)
		if live {
			_ = t.w.Flush()
		}
	}
	return t.w.Flush()
}

// dataCell is an event's data and metadata in one table cell.
func dataCell(r eventRow) string {
	v := map[string]any{}
	switch {
	case r.Decoded != nil:
		v["decoded"] = r.Decoded
	case r.Data != nil:
		v["data"] = r.Data
	case r.DataBase64 != nil:
		v["data_base64"] = r.DataBase64
	}
	if md, _ := json.Marshal(r.Metadata); string(md) != "{}" {
		v["metadata"] = r.Metadata
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func (a *app) eventsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "events",
		Short: "Find events across streams",
	}
	c.AddCommand(a.eventsFind())
	return c
}

func (a *app) eventsFind() *cobra.Command {
	var types, prefixes []string
	var correlation, command, causation string
	var limit int
	var ev eventFlags
	c := &cobra.Command{
		Use:   "find",
		Short: "Find events by type, stream prefix, correlation, causation or command ID",
		Long: `Find events in global order: those of --type and --prefix (repeat either), and
of --correlation, --causation or --command (the ID of the command that appended
them). Finding by type or prefix reads only matching events where the store
filters on the server; the IDs are compared on each event read, so narrow a
search of a large store by type or prefix.`,
		Args: args(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := notNegative("--limit", limit); err != nil {
				return err
			}
			filter := eventstore.Filter{Types: types, StreamPrefixes: prefixes}
			if err := filter.Validate(); err != nil {
				return &UsageError{Msg: "--prefix or --type", Err: err}
			}
			if filter.IsZero() && correlation == "" && command == "" && causation == "" {
				return usagef("events find needs at least one of --type, --prefix, --correlation, --causation, --command")
			}
			store, err := a.openStore(ctx, ReadOnly)
			if err != nil {
				return err
			}
			events := func(yield func(eventstore.Event, error) bool) {
				n := 0
				for e, err := range store.ReadAll(ctx, eventstore.Start, filter) {
					if err == nil && !(matches(correlation, e.Metadata.CorrelationID) &&
						matches(causation, e.Metadata.CausationID) && matches(command, e.Metadata.CommandID)) {
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
	c.Flags().StringSliceVar(&types, "type", nil, "events of this type (repeat, or comma-separated)")
	c.Flags().StringSliceVar(&prefixes, "prefix", nil, "events of streams starting with this (repeat, or comma-separated)")
	c.Flags().StringVar(&correlation, "correlation", "", "events with this correlation ID")
	c.Flags().StringVar(&causation, "causation", "", "events with this causation ID")
	c.Flags().StringVar(&command, "command", "", "events appended by the command with this ID")
	c.Flags().IntVar(&limit, "limit", 0, "print at most this many (0: all)")
	ev.register(c)
	return c
}

func matches(want, got string) bool { return want == "" || want == got }
