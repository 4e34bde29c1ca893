package kurrentdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// readStream reads up to count events of stream from revision from
// (forwards, or backwards when backward; from beyond the end reads from
// the end), giving each to fn until it returns false. It reports whether
// the stream exists: a stream never written, or deleted, is no error.
func (s *Store) readStream(ctx context.Context, stream string, from uint64, backward bool, count int, fn func(*esdb.RecordedEvent) (bool, error)) (exists bool, err error) {
	opts := esdb.ReadStreamOptions{From: esdb.Revision(from), Direction: esdb.Forwards}
	if backward {
		opts.Direction = esdb.Backwards
		if from >= 1<<63-1 {
			opts.From = esdb.End{}
		}
	}
	err = s.call(ctx, func(ctx context.Context, cli *esdb.Client) error {
		r, err := cli.ReadStream(ctx, stream, opts, uint64(count))
		if err != nil {
			return err
		}
		defer r.Close()
		exists = true
		return drain(r, func(e *esdb.ResolvedEvent) (bool, error) { return fn(e.Event) })
	})
	if isCode(err, esdb.ErrorCodeResourceNotFound) {
		return false, nil
	}
	if isCode(err, esdb.ErrorCodeStreamDeleted) {
		return false, fmt.Errorf("%w: kurrentdb: stream %q was deleted for good (tombstoned) outside Cairn", eventstore.ErrCorrupt, stream)
	}
	if err != nil {
		return false, s.fail(ctx, fmt.Sprintf("read stream %q", stream), err)
	}
	return exists, nil
}

// drain receives the events of r, giving each to fn until it returns
// false or r ends. The client panics on a reply it does not expect from
// the server; that is an error here, not a crash.
func drain(r *esdb.ReadStream, fn func(*esdb.ResolvedEvent) (bool, error)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the client failed on a reply from the server: %v", p)
		}
	}()
	for {
		e, err := r.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if e.Event == nil {
			continue // a link to a deleted event: Cairn writes none
		}
		more, err := fn(e)
		if err != nil || !more {
			return err
		}
	}
}

// toEvent converts a recorded event to Cairn's.
func toEvent(r *esdb.RecordedEvent) (eventstore.Event, error) {
	env, err := decodeEnvelope(r.StreamID, r.EventNumber, r.UserMetadata)
	if err != nil {
		return eventstore.Event{}, err
	}
	data := r.Data
	if data == nil {
		data = []byte{}
	}
	return eventstore.Event{
		EventData: eventstore.EventData{
			ID:            r.EventID,
			Type:          r.EventType,
			SchemaVersion: env.Schema,
			Data:          data,
			Metadata:      env.Metadata,
		},
		StreamID:   r.StreamID,
		Version:    r.EventNumber,
		Position:   position(r),
		RecordedAt: r.CreatedDate.UTC(),
	}, nil
}

// ReadStream implements [eventstore.Store.ReadStream], a page at a time.
func (s *Store) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	return storekit.ReadStreamPages(ctx, stream, opts, s.streamPage, 0)
}

func (s *Store) streamPage(ctx context.Context, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if isState(stream) {
		return nil, nil // the store's own streams are not events of Cairn's
	}
	var page []eventstore.Event
	size := 0
	_, err := s.readStream(ctx, stream, from, backward, limit, func(r *esdb.RecordedEvent) (bool, error) {
		e, err := toEvent(r)
		if err != nil {
			return false, err
		}
		page = append(page, e)
		size += storekit.PageBytes(&e)
		return !storekit.PageFull(len(page), limit, size), nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// ReadAll implements [eventstore.Store.ReadAll], a page at a time.
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, filter eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	return storekit.ReadPages(ctx, after, filter, s.readPage, 0)
}

// readPage reads one page of $all after position after. The client reads
// $all without a filter, so the page leaves out here what is not Cairn's
// (KurrentDB's system streams and events, the store's own streams) and
// what filter does not match; a page that read as many records as it
// asked for is Full, even if it keeps fewer.
func (s *Store) readPage(ctx context.Context, after eventstore.Position, filter eventstore.Filter, limit int) (storekit.Page, error) {
	if err := ctx.Err(); err != nil {
		return storekit.Page{}, err
	}
	opts := esdb.ReadAllOptions{Direction: esdb.Forwards, From: esdb.Start{}}
	if !after.IsZero() {
		opts.From = justAfter(after)
	}
	page := storekit.Page{Through: after}
	size, read := 0, 0
	err := s.call(ctx, func(ctx context.Context, cli *esdb.Client) error {
		r, err := cli.ReadAll(ctx, opts, uint64(limit))
		if err != nil {
			return err
		}
		defer r.Close()
		return drain(r, func(re *esdb.ResolvedEvent) (bool, error) {
			read++
			rec := re.Event
			pos := position(rec)
			if !after.Before(pos) {
				return true, nil
			}
			page.Through = pos
			if !cairns(rec) {
				return true, nil
			}
			e, err := toEvent(rec)
			if err != nil {
				return false, err
			}
			if !filter.Match(&e) {
				return true, nil
			}
			page.Events = append(page.Events, e)
			size += storekit.PageBytes(&e)
			if storekit.PageFull(len(page.Events), limit, size) {
				page.Full = true
				return false, nil
			}
			return true, nil
		})
	})
	if err != nil {
		return storekit.Page{}, s.fail(ctx, "read $all after "+after.String(), err)
	}
	if read >= limit {
		page.Full = true
	}
	return page, nil
}

// justAfter is where a read of $all starts to leave out the record at p.
// KurrentDB reads $all forwards from a position inclusively: it goes to
// the record at the commit part, and keeps those whose (commit, prepare)
// is at or after the position asked for. One more in the prepare part
// therefore leaves the record at p out without reading it (a read that
// kept it would fetch the consumer's last event again at every poll);
// records at or before p are also dropped when they come.
func justAfter(p eventstore.Position) esdb.Position {
	if p.Minor == math.MaxUint64 {
		return esdb.Position{Commit: p.Major + 1}
	}
	return esdb.Position{Commit: p.Major, Prepare: p.Minor + 1}
}

// cairns reports whether a record of $all is an event of Cairn's: not in a
// system stream or of a system type (both start with "$"), nor in the
// store's own streams.
func cairns(r *esdb.RecordedEvent) bool {
	return !strings.HasPrefix(r.StreamID, "$") && !strings.HasPrefix(r.EventType, "$") && !isState(r.StreamID)
}
