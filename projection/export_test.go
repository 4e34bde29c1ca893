package projection

import "time"

// SetLagCache sets how long a reading of the consumers' gauges is reused,
// so that a test sees each change at once (0), and returns what restores
// it.
func SetLagCache(d time.Duration) (restore func()) {
	old := lagCacheFor.Swap(int64(d))
	return func() { lagCacheFor.Store(old) }
}
