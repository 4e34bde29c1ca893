package storecopy_test

import (
	"context"
	"fmt"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storecopy"
)

func Example() {
	ctx := context.Background()
	from, to := memory.New(), memory.New()
	defer from.Close()
	defer to.Close()
	for _, order := range []string{"order-1", "order-2"} {
		_, err := from.Append(ctx, order, eventstore.NoStream,
			eventstore.EventData{Type: "order.placed", Data: []byte(`{}`)},
			eventstore.EventData{Type: "order.paid", Data: []byte(`{}`)})
		if err != nil {
			panic(err)
		}
	}

	report, err := storecopy.Copy(ctx, from, to, storecopy.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("copied %d events, %d streams verified, %d mismatches\n",
		report.Copied, report.Verification.Streams, len(report.Verification.Mismatches))

	// A second run finds the copy's checkpoint in the target: nothing to do.
	report, err = storecopy.Copy(ctx, from, to, storecopy.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("copied %d events on the second run\n", report.Copied)
	// Output:
	// copied 4 events, 2 streams verified, 0 mismatches
	// copied 0 events on the second run
}
