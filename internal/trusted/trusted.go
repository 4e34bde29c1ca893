// Package trusted marks the appends that Cairn's own writers make: the
// records only Cairn may write (types with the "cairn." prefix, saga
// streams, Cairn's metadata keys), which every store refuses from any
// other caller of Append (see storekit.PrepareAppend). Being internal,
// the mark cannot be made outside this module.
package trusted

import "context"

type writerKey struct{}

// Writer returns ctx marked as the context of an append by Cairn itself.
// Mark the context at the append only, never one handed to user code.
func Writer(ctx context.Context) context.Context {
	return context.WithValue(ctx, writerKey{}, true)
}

// IsWriter reports whether ctx was marked by [Writer].
func IsWriter(ctx context.Context) bool {
	marked, _ := ctx.Value(writerKey{}).(bool)
	return marked
}
