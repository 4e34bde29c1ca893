//go:build cairnfailpoints && unix

package failpoint_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/internal/failpoint"
)

// TestKill runs TestKillChild in a child process armed at the second hit
// of a failpoint it hits three times: the child must die by SIGKILL at
// that hit, after saying so, and before its third. Armed at a fourth hit,
// it lives.
func TestKill(t *testing.T) {
	run := func(spec string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.v")
		cmd.Env = append(os.Environ(), "CAIRN_FAILPOINT_CHILD=1", failpoint.Env+"="+spec)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(failpoint.SagaAfterStepAppend + "@2")
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the child was to be killed; it ended with %v:\n%s", err, out)
	ws := exit.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled(), out)
	assert.Equal(t, syscall.SIGKILL, ws.Signal())
	assert.Contains(t, out, "failpoint: saga.after-step-append@2: SIGKILL")
	assert.Contains(t, out, "hit 1\n")
	assert.NotContains(t, out, "hit 2\n", "the kill comes at the hit, before the code after it")

	out, err = run(failpoint.SagaAfterStepAppend + "@4")
	require.NoError(t, err, out)
	assert.Contains(t, out, "hit 3\n")
	assert.Contains(t, out, "hits 3\n")
}

func TestKillChild(t *testing.T) {
	if os.Getenv("CAIRN_FAILPOINT_CHILD") != "1" {
		t.Skip("child process of TestKill")
	}
	s, err := failpoint.Armed()
	require.NoError(t, err)
	require.Equal(t, failpoint.SagaAfterStepAppend, s.Name)
	for i := 1; i <= 3; i++ {
		failpoint.Hit(failpoint.SagaAfterStepAppend)
		failpoint.Hit(failpoint.BusAfterAppend) // another name does not count
		fmt.Printf("hit %d\n", i)
	}
	fmt.Printf("hits %d\n", failpoint.Hits(failpoint.SagaAfterStepAppend))
}
