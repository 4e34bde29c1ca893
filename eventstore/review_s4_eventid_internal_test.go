package eventstore

// Review s4: NewEventIDAt with a reading outside the years UnixNano
// represents (1678 to 2262). Internal, to put the process's last ID time
// back afterwards (restoreV7Time): the reading moves it for every later ID.

import (
	"testing"
	"time"
)

// A reading from before 1678 is out of UnixNano's range, whose result is
// then undefined: for 1600-01-01 it wraps to a time in 2184. NewEventIDAt
// must not make an ID in the far future from a reading in the past, nor
// move every later ID of the process there (NewEventID then stamps IDs of
// now with 2184 until that time comes).
func TestReviewS4ReadingBeforeUnixNanoRangeDoesNotMoveIDsToTheFuture(t *testing.T) {
	restoreV7Time(t)
	before := time.Now().UnixMilli()
	past := NewEventIDAt(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))
	id := NewEventID()
	after := time.Now().UnixMilli()
	if got := millis(past); got > after+1 {
		t.Errorf("an ID at a reading of 1600 holds millisecond %d (%s), after the clock's %d",
			got, time.UnixMilli(got).UTC(), after)
	}
	if got := millis(id); got < before || got > after+1 {
		t.Errorf("NewEventID after it holds millisecond %d (%s), not the clock's [%d, %d]",
			got, time.UnixMilli(got).UTC(), before, after)
	}
}
