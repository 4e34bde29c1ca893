package projectiontest

import "testing"

func runChild[Tx any](t *testing.T, h Harness[Tx]) bool { return false }

func testCrash[Tx any](t *testing.T, h Harness[Tx]) {
	t.Skip("TODO")
}

func testTwoProcesses[Tx any](t *testing.T, h Harness[Tx]) {
	t.Skip("TODO")
}
