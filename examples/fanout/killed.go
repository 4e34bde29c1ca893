package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
)

// The environment of the fan-out worker that is killed half-way: a child
// process of the example (or of its test binary), which runs the same fan-out
// and kills itself with SIGKILL in the middle of a post.
const (
	killedWorkerEnv = "CAIRN_FANOUT_KILLED_WORKER" // the store's path
	timelinesEnv    = "CAIRN_FANOUT_TIMELINES"
	killAtEnv       = "CAIRN_FANOUT_KILL_AT" // the post, counted from 1, that it dies in
)

// isKilledWorker reports whether this process is the worker to be killed.
func isKilledWorker() bool { return os.Getenv(killedWorkerEnv) != "" }

// killedWorker is the child's main. It runs the fan-out from its checkpoint
// and, from its killAt-th handler call on, once it has written a post into
// half of the timelines, inside the transaction of its batch, it kills
// itself: no deferred call, no rollback, no close. What it wrote of that batch is in the SQLite file's
// write-ahead log, uncommitted, and SQLite discards it. It prints where it
// died, and returns only if it never got there.
func killedWorker() int {
	ctx := context.Background()
	path := os.Getenv(killedWorkerEnv)
	timelines, err1 := strconv.Atoi(os.Getenv(timelinesEnv))
	killAt, err2 := strconv.Atoi(os.Getenv(killAtEnv))
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "killed worker:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	svc, err := open(ctx, path, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "killed worker:", err)
		return 2
	}
	f, err := newFanout(ctx, svc.store, svc.reg, svc.authors, timelines, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "killed worker:", err)
		return 2
	}
	posts := 0
	f.beforeInsert = func(post string, i int) {
		if i == 0 {
			posts++
		}
		// At or after the killAt-th handler call: a call can fail before
		// it gets half-way (the poison post).
		if posts >= killAt && i == timelines/2 {
			fmt.Printf("%s %d\n", post, i)
			self, err := os.FindProcess(os.Getpid())
			if err == nil {
				err = self.Kill()
			}
			fmt.Fprintln(os.Stderr, "killed worker: could not kill itself:", err)
			os.Exit(2)
		}
	}
	err = f.consumer.CatchUp(ctx)
	fmt.Fprintf(os.Stderr, "killed worker: caught up without reaching post %d (%v)\n", killAt, err)
	return 3
}

// kill is what the parent learns of the killed worker.
type kill struct {
	post     string // the post it was writing
	timeline int    // how many timelines it had written the post into
	status   string // how it ended: "signal: killed"
}

// runKilledWorker starts the worker to be killed on the store at path, and
// waits for it to die.
func runKilledWorker(ctx context.Context, path string, timelines, killAt int) (kill, error) {
	exe, err := os.Executable()
	if err != nil {
		return kill{}, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(),
		killedWorkerEnv+"="+path,
		timelinesEnv+"="+strconv.Itoa(timelines),
		killAtEnv+"="+strconv.Itoa(killAt),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	// Killed, its exit code is -1 (a signal) on Unix and 1 on Windows; 2 and
	// 3 are its own failures.
	if !errors.As(err, &exit) || exit.ExitCode() == 2 || exit.ExitCode() == 3 {
		return kill{}, fmt.Errorf("the fan-out worker was to die by a signal, but: %v (output %q)", err, out.String())
	}
	k := kill{status: exit.String()}
	if _, err := fmt.Sscanf(out.String(), "%s %d", &k.post, &k.timeline); err != nil {
		return kill{}, fmt.Errorf("the killed worker's last words %q: %w", out.String(), err)
	}
	return k, nil
}
