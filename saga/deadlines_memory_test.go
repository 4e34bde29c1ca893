package saga

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestTenThousandPendingDeadlinesCostLittleMemory measures what a runner
// keeps for 10,000 pending deadlines: one heap entry and one map entry
// each, no timer or goroutine. The bound is 10 MB.
func TestTenThousandPendingDeadlinesCostLittleMemory(t *testing.T) {
	const n = 10_000
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	goroutines := runtime.NumGoroutine()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tm := newTimers()
	for i := range n {
		id := fmt.Sprintf("order-%06d", i)
		tm.observe(id, 1, []deadline{{ID: deadlineID("saga:sale-"+id, "e/orders/1", "payment"), Name: "payment", At: start.Add(time.Duration(i) * time.Second)}})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d pending deadlines: %d bytes in the heap, %d bytes each", n, used, used/n)
	if used > 10<<20 {
		t.Errorf("%d pending deadlines use %d bytes, more than 10 MB", n, used)
	}
	if runtime.NumGoroutine() > goroutines {
		t.Errorf("pending deadlines started %d goroutines", runtime.NumGoroutine()-goroutines)
	}
	count, next := tm.count()
	if count != n || !next.Equal(start) {
		t.Errorf("the index holds %d deadlines, next at %s", count, next)
	}
	if due := tm.popDue(start.Add(time.Hour)); len(due) != 3601 {
		t.Errorf("%d deadlines due in the first hour, want 3601", len(due))
	}
	runtime.KeepAlive(tm)
}
