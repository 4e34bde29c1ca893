package postgres_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procCPU is the process's CPU time so far, all threads: cpu-ns/op varies
// less than ns/op on a machine shared with other work.
func procCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverPIDEnv names the environment variable that gives the benchmarks
// the PID of the test server's postmaster, for server-cpu-ns/op: the CPU
// time of the postmaster and its children, live and ended. On a machine of
// few cores the server's CPU bounds concurrent appends as much as the
// client's does.
const serverPIDEnv = "CAIRN_POSTGRES_PID"

// serverCPU is the server's CPU time so far, and false when it cannot be
// read (no PID given, or no /proc).
func serverCPU() (time.Duration, bool) {
	pid := os.Getenv(serverPIDEnv)
	if pid == "" {
		return 0, false
	}
	// Fields after the command's closing parenthesis: state is [0], ppid
	// [1], utime [11], stime [12], cutime [13], cstime [14], in clock
	// ticks (100 a second on Linux).
	fields := func(path string) []string {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		s := string(b)
		return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	}
	ticks := func(f []string, from, to int) int64 {
		var n int64
		for i := from; i <= to; i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			n += v
		}
		return n
	}
	main := fields("/proc/" + pid + "/stat")
	if len(main) < 15 {
		return 0, false
	}
	total := ticks(main, 11, 14) // the children that ended are in cutime, cstime
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		if f := fields(path); len(f) > 12 && f[1] == pid {
			total += ticks(f, 11, 12)
		}
	}
	return time.Duration(total) * 10 * time.Millisecond, true
}
