package check

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Record runs fn with a [testing.TB] that records its failures instead of
// failing t, and returns them: how a kit's own tests show that the kit
// fails a broken store. fn runs in a goroutine of its own, which Fatal,
// FailNow and Skip end, as the testing package ends a test's. Everything
// else (Cleanup, TempDir, Log, Context, Name) is t's.
func Record(t testing.TB, fn func(tb testing.TB)) []string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed && len(r.failures) == 0 {
		r.failures = append(r.failures, "failed without a message")
	}
	return r.failures
}

type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	failed   bool
	skipped  bool
}

func (r *recorder) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.failures = append(r.failures, strings.TrimSuffix(msg, "\n"))
}

func (r *recorder) Helper() {}

func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Error(args ...any)                 { r.record(fmt.Sprintln(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Skip(args ...any)                  { r.SkipNow() }
func (r *recorder) Skipf(format string, args ...any)  { r.SkipNow() }
func (r *recorder) SkipNow()                          { r.mu.Lock(); r.skipped = true; r.mu.Unlock(); runtime.Goexit() }
func (r *recorder) Skipped() bool                     { r.mu.Lock(); defer r.mu.Unlock(); return r.skipped }
