package kurrentdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// The store's dead letters: the storekit.DeadLetterStore methods, and the
// compaction of a consumer's stream. How a consumer's dead letters are kept
// in that stream and folded is in deadletterfold.go.
var _ storekit.DeadLetterStore = (*Store)(nil)

// ParkDeadLetter implements [storekit.DeadLetterStore.ParkDeadLetter]:
// reading the records since the last call, and appending the dead letter
// at the revision read (see letterFold); when another process wrote in
// between, reading and deciding again.
func (s *Store) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	f, unlock, err := s.lockedLetters(ctx, d.Consumer, storekit.CheckDeadLetter(d))
	if err != nil {
		return eventstore.DeadLetter{}, err
	}
	defer unlock()
	for attempt := 1; ; attempt++ {
		next, err := f.parked(d)
		if err != nil {
			return eventstore.DeadLetter{}, err
		}
		err = s.writeLetters(ctx, f, parkedOf(&next))
		if err == nil {
			if f.folded {
				f.set(next)
			}
			s.compact(ctx, f)
			return copyLetter(next), nil
		}
		if !isWrongVersion(err) {
			return eventstore.DeadLetter{}, err
		}
		if attempt == raceAttempts {
			return eventstore.DeadLetter{}, lostRace(fmt.Sprintf("consumer %q parking event %s of stream %q", d.Consumer, d.Event.ID, d.Event.StreamID), attempt)
		}
		if err := s.tail(ctx, f); err != nil {
			return eventstore.DeadLetter{}, err
		}
	}
}

// DeleteDeadLetter implements [storekit.DeadLetterStore.DeleteDeadLetter]:
// as a park, an append at the revision read.
func (s *Store) DeleteDeadLetter(ctx context.Context, consumer, id string) error {
	f, unlock, err := s.lockedLetters(ctx, consumer, storekit.CheckDeadLetterLookup(consumer, id))
	if err != nil {
		return err
	}
	defer unlock()
	for attempt := 1; ; attempt++ {
		if _, ok := f.byID[id]; !ok {
			return &storekit.DeadLetterNotFoundError{Consumer: consumer, ID: id}
		}
		err := s.writeLetters(ctx, f, record{typ: deletedRecord, fields: deletedFields{ID: id, Consumer: consumer}})
		if err == nil {
			f.remove(id)
			s.compact(ctx, f)
			return nil
		}
		if !isWrongVersion(err) {
			return err
		}
		if attempt == raceAttempts {
			return lostRace(fmt.Sprintf("consumer %q deleting dead letter %q", consumer, id), attempt)
		}
		if err := s.tail(ctx, f); err != nil {
			return err
		}
	}
}

// DeadLetters implements [storekit.DeadLetterStore.DeadLetters]: the
// fold, read up to the stream's end, by ID.
func (s *Store) DeadLetters(ctx context.Context, consumer string) iter.Seq2[eventstore.DeadLetter, error] {
	return storekit.ListSeq(func() ([]eventstore.DeadLetter, error) {
		var out []eventstore.DeadLetter
		err := s.withLetters(ctx, consumer, func(f *letterFold) {
			for _, id := range slices.Sorted(maps.Keys(f.byID)) {
				out = append(out, copyLetter(f.byID[id]))
			}
		})
		return out, err
	})
}

// DeadLetterKeys implements [storekit.DeadLetterStore.DeadLetterKeys]:
// the fold, read up to the stream's end, by position.
func (s *Store) DeadLetterKeys(ctx context.Context, consumer string, after, through eventstore.Position) iter.Seq2[storekit.DeadLetterKey, error] {
	return storekit.ListSeq(func() ([]storekit.DeadLetterKey, error) {
		var keys []storekit.DeadLetterKey
		err := s.withLetters(ctx, consumer, func(f *letterFold) {
			for _, d := range f.byID {
				keys = append(keys, storekit.KeyOf(d))
			}
		})
		return storekit.SortDeadLetterKeys(keys, after, through), err
	})
}

// DeadLetter implements [storekit.DeadLetterStore.DeadLetter].
func (s *Store) DeadLetter(ctx context.Context, consumer, id string) (eventstore.DeadLetter, error) {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return eventstore.DeadLetter{}, err
	}
	var d eventstore.DeadLetter
	var ok bool
	err := s.withLetters(ctx, consumer, func(f *letterFold) {
		d, ok = f.byID[id]
		d = copyLetter(d)
	})
	if err == nil && !ok {
		err = &storekit.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return d, err
}

// CountDeadLetters implements [storekit.DeadLetterStore.CountDeadLetters].
func (s *Store) CountDeadLetters(ctx context.Context, consumer string) (int, error) {
	n := 0
	err := s.withLetters(ctx, consumer, func(f *letterFold) { n = len(f.byID) })
	return n, err
}

// withLetters runs fn on the fold of consumer's dead letters, read up to
// the stream's end.
func (s *Store) withLetters(ctx context.Context, consumer string, fn func(*letterFold)) error {
	f, unlock, err := s.lockedLetters(ctx, consumer, storekit.ValidateConsumerName(consumer))
	if err != nil {
		return err
	}
	defer unlock()
	fn(f)
	return nil
}

// lockedLetters returns the fold of consumer's dead letters, read up to
// the stream's end and locked until unlock, once the caller's check of its
// arguments (invalid, nil when they are fine) and the store's state allow.
func (s *Store) lockedLetters(ctx context.Context, consumer string, invalid error) (f *letterFold, unlock func(), err error) {
	if invalid != nil {
		return nil, nil, invalid
	}
	if err := s.usable(ctx); err != nil {
		return nil, nil, err
	}
	return s.letters(ctx, consumer)
}

// compact compacts f's stream when it is due (see letterFold). It is part
// of the write that made it due, but its failure is not that write's: it
// is logged, and the records it wrote fold to what they did.
func (s *Store) compact(ctx context.Context, f *letterFold) {
	live := len(f.byID)
	superseded := int(f.next-f.since) - live
	if !f.folded || superseded < s.caches().compactAfter || superseded < live {
		return
	}
	letters := slices.SortedFunc(maps.Values(f.byID), func(a, b eventstore.DeadLetter) int { return cmp.Compare(a.ID, b.ID) })
	// The marker first, in the first append: $tb is set to it, so that a
	// record exists at $tb even when no letter is left to restate.
	from := f.next
	recs := []record{{typ: compactedRecord, fields: compactedFields{Consumer: f.consumer}}}
	for {
		size, n := 0, 0 // of this append's letters; the first goes in whatever its size
		for len(letters) > 0 && len(recs) < compactRecords && (n == 0 || size+len(letters[0].Event.Data) <= compactBytes) {
			size, n = size+len(letters[0].Event.Data), n+1
			recs = append(recs, parkedOf(&letters[0]))
			letters = letters[1:]
		}
		err := s.writeLetters(ctx, f, recs...)
		if err == nil && !f.folded {
			err = errors.New("its records landed elsewhere than their expected revision put them")
		}
		if err != nil {
			s.compacted(f, from, err)
			return
		}
		if len(letters) == 0 {
			break
		}
		recs = nil
	}
	// Only now that every live letter follows the marker: a fold that
	// begins at the marker must find them all.
	err := s.truncateBefore(ctx, f.stream, from)
	s.compacted(f, from, err)
}

// compacted ends a compaction of f from revision from. Done, it leaves
// f counting superseded records from there; cut short by err, from where
// it stopped, so that a compaction that keeps failing is tried again only
// after as many writes again, not at every write.
func (s *Store) compacted(f *letterFold, from uint64, err error) {
	if err != nil {
		f.since = f.next
		s.log.Debug("kurrentdb: compacting the dead letters of a consumer failed; the next write that makes it due tries again",
			"consumer", f.consumer, "stream", f.stream, "version", from, "error", err)
		return
	}
	f.since = from
	s.log.Debug("kurrentdb: compacted the dead letters of a consumer", "consumer", f.consumer, "stream", f.stream, "from", from)
}
