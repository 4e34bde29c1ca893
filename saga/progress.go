package saga

import "slices"

// maxAbove bounds the sequences a source may have handled out of order
// above its watermark (see progress.Above): a message of an AnyOrder type
// that would pass it waits, held, for the gap below to fill.
const maxAbove = 256

// progress is what an instance has taken from one source. One structure,
// three fields, each with one job: Next is in-order dedup, Above the
// any-order messages handled past a gap, Pending the stored events that
// wait to be read again.
type progress struct {
	// Next is the first sequence not taken in order: every message of the
	// source below it was handled, or passed over (a stored event the saga
	// does not map, a gap an operator released, a skipped message).
	Next uint64 `json:"next"`
	// Above are the sequences above Next handled out of order (messages of
	// AnyOrder types), ascending; at most maxAbove. When the gap below them
	// fills, Next moves past them.
	Above []uint64 `json:"above,omitempty"`
	// Pending says that stored events of the source from Next on may be
	// waiting: they reached the instance while it could not take them
	// (behind a parked message), and are read again from the store, in
	// their stream's order, when it can. Every later event of the source
	// waits behind them, so none overtakes an earlier one.
	Pending bool `json:"pending,omitempty"`
	// HeldTo is, while Pending, the highest sequence of the source held:
	// an event at or below it was held by a step already stored, which the
	// drain reads past, so its redelivery is a duplicate.
	HeldTo uint64 `json:"held_to,omitempty"`
}

// waits reports whether the stored event at seq was held already, and
// waits in its pending source.
func (p progress) waits(seq uint64) bool { return p.Pending && seq >= p.Next && seq <= p.HeldTo }

// taken reports whether the message at seq was handled or passed over:
// a repeat of it is a duplicate.
func (p progress) taken(seq uint64) bool {
	if seq < p.Next {
		return true
	}
	_, found := slices.BinarySearch(p.Above, seq)
	return found
}

// take records the message at seq as handled. A stored event (ordered)
// moves Next past itself: the events of its stream before it that reach
// this instance came first. A delivery moves Next only when it is next;
// above it, it joins Above.
func (p progress) take(seq uint64, ordered bool) progress {
	switch {
	case ordered || seq == p.Next:
		p.Next = max(p.Next, seq+1)
		if p.HeldTo < p.Next {
			p.HeldTo = 0
		}
	default:
		i, found := slices.BinarySearch(p.Above, seq)
		if !found {
			p.Above = slices.Insert(slices.Clone(p.Above), i, seq)
		}
	}
	return p.fold()
}

// passTo moves Next to seq (when it is below), giving up on what is
// missing below seq.
func (p progress) passTo(seq uint64) progress {
	p.Next = max(p.Next, seq)
	return p.fold()
}

// fold moves Next past the sequences of Above that it reaches, and drops
// those below it.
func (p progress) fold() progress {
	i := 0
	for i < len(p.Above) && p.Above[i] <= p.Next {
		if p.Above[i] == p.Next {
			p.Next++
		}
		i++
	}
	if i > 0 {
		p.Above = slices.Clone(p.Above[i:])
	}
	if len(p.Above) == 0 {
		p.Above = nil
	}
	return p
}

// full reports whether Above can take no more sequences.
func (p progress) full() bool { return len(p.Above) >= maxAbove }
