//go:build unix

package memory_test

import (
	"syscall"
	"testing"
)

// reportCPU reports the process's CPU time (user and system, all threads)
// per op from start on, steadier than wall time on a shared machine.
func reportCPU(b *testing.B, start int64) {
	b.ReportMetric(float64(cpuNanos()-start)/float64(b.N), "cpu-ns/op")
}

// cpuNanos is the process's CPU time so far.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
