package cli

// SetPendingCap lowers the cap on the events counted after a checkpoint,
// so that a test shows a capped count without 10,000 events; the returned
// function puts it back.
func SetPendingCap(n int) (restore func()) {
	old := pendingCap
	pendingCap = n
	return func() { pendingCap = old }
}
