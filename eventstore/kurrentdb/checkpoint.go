package kurrentdb

import (
	"context"
	"fmt"
	"math"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.CheckpointStore = (*Store)(nil)

// checkpointRecord is the type of the records of a checkpoint stream.
const checkpointRecord = "cairn.checkpoint"

// checkpointFields is a checkpoint as its stream keeps it: each save
// appends one, and the last is the checkpoint.
type checkpointFields struct {
	Consumer string              `json:"consumer"`
	Position eventstore.Position `json:"position"`
	Fence    storekit.Fence      `json:"fence"`
}

// Checkpoint implements [storekit.CheckpointStore.Checkpoint]: one
// backward read of the consumer's checkpoint stream, for its last record.
func (s *Store) Checkpoint(ctx context.Context, name string) (storekit.Checkpoint, error) {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return storekit.Checkpoint{}, err
	}
	if err := s.usable(ctx); err != nil {
		return storekit.Checkpoint{}, err
	}
	cp, _, err := s.storedCheckpoint(ctx, name)
	return cp, err
}

// SaveCheckpoint implements [storekit.CheckpointStore.SaveCheckpoint].
//
// The stream "cairn:checkpoint-<name>" keeps the last stateHistory saves.
// A save reads the last one, decides with [storekit.CheckSave], and appends
// at the revision it read: KurrentDB refuses the append when another save
// came in between, and the save reads again and decides again, so that it
// either answers the conflict with what that save stored or, when the
// stored checkpoint still allows it (a claim that repeats the position),
// writes after it. A save costs a read and an append; the first save of a
// consumer also sets its stream's $maxCount.
func (s *Store) SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return err
	}
	if err := storekit.CheckFence(name, fence); err != nil {
		return err
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	stream := stateStream(checkpointKind, name)
	for attempt := 1; ; attempt++ {
		stored, at, err := s.storedCheckpoint(ctx, name)
		if err != nil {
			return err
		}
		if err := storekit.CheckSave(name, stored, expected, fence); err != nil {
			return err
		}
		if _, first := at.(esdb.NoStream); first {
			if err := s.limitStream(ctx, stream, stateHistory); err != nil {
				return err
			}
		}
		_, err = s.appendRecords(ctx, stream, at, record{typ: checkpointRecord,
			fields: checkpointFields{Consumer: name, Position: next, Fence: fence}})
		if !isWrongVersion(err) {
			return err
		}
		if attempt == raceAttempts {
			return lostRace(fmt.Sprintf("save the checkpoint of consumer %q", name), attempt)
		}
	}
}

// storedCheckpoint reads the checkpoint of consumer name, and the expected
// revision of a save that replaces it.
func (s *Store) storedCheckpoint(ctx context.Context, name string) (storekit.Checkpoint, esdb.ExpectedRevision, error) {
	stream := stateStream(checkpointKind, name)
	last, err := s.lastRecord(ctx, stream)
	if err != nil || last == nil {
		return storekit.Checkpoint{}, after(last), err
	}
	cp, err := decodeCheckpoint(stream, name, last)
	if err != nil {
		return storekit.Checkpoint{}, nil, err
	}
	return cp, after(last), nil
}

// decodeCheckpoint returns the checkpoint of consumer name that last, the
// last record of its stream, keeps.
func decodeCheckpoint(stream, name string, last *esdb.RecordedEvent) (storekit.Checkpoint, error) {
	var f checkpointFields
	if err := decodeRecord(stream, last, checkpointRecord, &f); err != nil {
		return storekit.Checkpoint{}, err
	}
	switch {
	case f.Consumer != name:
		return storekit.Checkpoint{}, corruptRecord(stream, last, fmt.Sprintf("is the checkpoint of consumer %q", f.Consumer))
	case f.Fence > math.MaxInt64:
		return storekit.Checkpoint{}, corruptRecord(stream, last, fmt.Sprintf("has fence %d, which no lease hands out", f.Fence))
	}
	return storekit.Checkpoint{Position: f.Position, Fence: f.Fence}, nil
}
