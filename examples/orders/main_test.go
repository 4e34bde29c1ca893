package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// The demo checks its own exactly-once claims and fails when they do not
// hold; running it twice on one folder checks that a second run reuses and
// adds to the first one's data.
func TestDemoRunsTwiceOnOneFolder(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, run(context.Background(), dir, 40))
	require.NoError(t, run(context.Background(), dir, 25))
}
