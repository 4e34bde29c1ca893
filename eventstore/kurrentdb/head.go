package kurrentdb

import (
	"context"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore"
)

// maxHeadPage is the most records of $all Head reads at a time,
// backwards, past KurrentDB's system records and the store's own. It reads
// one first, as the newest record is mostly an event of Cairn's, and the
// server sends a read's records before they are asked for: a larger first
// page would carry large events for nothing.
const maxHeadPage = 64

// Head returns the position of the newest event of Cairn's in $all
// ([eventstore.Start] when there is none): how far a subscriber has to
// read to be caught up (projection.HeadReader). It reads $all backwards
// from its end, past the records that reads leave out.
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.Position{}, err
	}
	var from esdb.AllPosition = esdb.End{}
	for page := 1; ; page = min(2*page, maxHeadPage) {
		var head, oldest *esdb.RecordedEvent
		read := 0
		err := s.call(ctx, func(ctx context.Context, cli *esdb.Client) error {
			r, err := cli.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: from}, uint64(page))
			if err != nil {
				return err
			}
			defer r.Close()
			return drain(r, func(e *esdb.ResolvedEvent) (bool, error) {
				read++
				oldest = e.Event
				if cairns(e.Event) {
					head = e.Event
					return false, nil
				}
				return true, nil
			})
		})
		if err != nil {
			return eventstore.Position{}, s.fail(ctx, "read the head of $all", err)
		}
		if head != nil {
			return position(head), nil
		}
		if read < page || oldest == nil {
			return eventstore.Start, nil
		}
		// Go on from the oldest record read: whether the next page holds
		// it again or starts below it, the loop moves down.
		from = esdb.Position{Commit: oldest.Position.Commit, Prepare: oldest.Position.Prepare}
	}
}
