package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/saga"
)

// After a reconnect the messages since the last acknowledgement come again
// and are absorbed; a message that overtook an earlier one of its parcel is
// held, and reported as a gap, until the earlier one arrives; then both are
// handled, in order, and every order gets every stage once.
func TestDuplicatesAreAbsorbedAndAGapIsReportedUntilItFills(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			cfg := config{parcels: 12, seed: seed, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			var out strings.Builder
			r, err := run(context.Background(), cfg, &out)
			require.NoError(t, err, out.String())
			t.Log("\n" + out.String())

			assert.Equal(t, 48, r.messages)
			assert.Equal(t, 2, r.sessions)
			assert.Less(t, r.resumedAfter, r.droppedAfter, "the second session resumed before where the first dropped")
			assert.Equal(t, int(r.droppedAfter-r.resumedAfter), r.deliveries-r.messages, "delivered again: those since the last ack")

			assert.Equal(t, int64(48), r.stats.Handled)
			assert.Positive(t, r.stats.Duplicates)
			assert.Equal(t, int64(r.deliveries-r.messages), r.stats.Duplicates, "every delivery again was absorbed")
			assert.Equal(t, int64(1), r.stats.Held)

			assert.Equal(t, r.overtaken, r.gapOpened, "the gap is listed as soon as the overtaking message is held")
			assert.Equal(t, r.late, r.gapFilled, "and until the late message arrives")
			assert.Equal(t, saga.Gap{Instance: r.lateParcel, Source: "carrier.parcels", WaitsFor: 2, Held: 1, Since: r.gap.Since}, r.gap)
			assert.Less(t, r.droppedAfter, r.late, "the gap was open across the reconnect")
			assert.Equal(t, []string{"seq 0 event", "seq 1 event", "seq 3 held", "seq 2 event", "seq 3 event"}, r.history)
			assert.Zero(t, r.stats.Gaps, "no gap is left")

			assert.Equal(t, 48, r.applied, "one command per message")
			assert.Zero(t, r.refused, "none out of order")
			assert.Equal(t, 12, r.ordersInOrder)
		})
	}
}
