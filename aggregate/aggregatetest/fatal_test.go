package aggregatetest_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cairn-es/cairn/aggregate/aggregatetest"
)

// fatalRecorder records fatal failures and ends the goroutine, as
// testing.T does; panicked is set when the specification panicked instead.
type fatalRecorder struct {
	testing.TB
	fatals   []string
	errors   []string
	panicked any
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// runFatal runs spec on its own goroutine, as the testing package runs a
// test, and returns what it reported.
func runFatal(spec func(t testing.TB)) *fatalRecorder {
	r := &fatalRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { r.panicked = recover() }()
		spec(r)
	}()
	<-done
	return r
}

// TestMisuseIsFatalNotAPanic: a nil aggregate type, or an ID that no
// dispatch could reach, fails the test with a message instead of panicking
// or passing.
func TestMisuseIsFatalNotAPanic(t *testing.T) {
	typ := accountType(t)
	for name, tc := range map[string]struct {
		spec func(t testing.TB)
		want string
	}{
		"nil type": {func(t testing.TB) {
			aggregatetest.For[Account](t, nil).Given(Deposited{Amount: 1}).When(Deposit{Amount: 1}).Then(Deposited{Amount: 1})
		}, "aggregate type is nil"},
		"empty ID": {func(t testing.TB) {
			aggregatetest.For(t, typ).WithID("").When(Deposit{Amount: 1}).Then(Deposited{Amount: 1})
		}, "aggregate ID is empty"},
		"NUL byte in ID": {func(t testing.TB) {
			aggregatetest.For(t, typ).WithID("a\x00").When(Deposit{Amount: 1}).Then(Deposited{Amount: 1})
		}, "aggregate ID"},
	} {
		r := runFatal(tc.spec)
		assert.Nil(t, r.panicked, name)
		if assert.Len(t, r.fatals, 1, name) {
			assert.Contains(t, r.fatals[0], tc.want, name)
		}
	}
}
