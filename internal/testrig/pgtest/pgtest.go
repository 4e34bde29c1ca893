// Package pgtest starts a throwaway PostgreSQL server for the tests of one
// test binary, with the PostgreSQL binaries already on the machine.
//
// A package's TestMain calls [Main]; its tests then connect to
// [Server.URL] and isolate themselves in schemas of their own (see
// [Server.NewSchema]), which is much cheaper than a cluster or a database per
// test:
//
//	var server *pgtest.Server
//
//	func TestMain(m *testing.M) {
//		os.Exit(pgtest.Main(m, pgtest.Options{}, &server))
//	}
//
// When CAIRN_POSTGRES_URL is set, Main uses that server instead of starting
// one. When no server can be had, Main prints one line saying why and runs
// no test, unless the environment variable CI is "true": then it fails, so
// that PostgreSQL tests never skip silently in CI.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-es/cairn/internal/redact"
	"github.com/jackc/pgx/v5"
)

// URLEnv names the environment variable that points the tests at an
// existing server instead of a throwaway one.
const URLEnv = "CAIRN_POSTGRES_URL"

// BinEnv names the environment variable that gives the folder of the
// PostgreSQL binaries (initdb, postgres) to use instead of searching PATH
// and /usr/lib/postgresql.
const BinEnv = "CAIRN_POSTGRES_BIN"

// Options configures the throwaway server. The zero value starts a server
// tuned for functional tests (no fsync).
type Options struct {
	// Durable keeps PostgreSQL's default durability (fsync on,
	// synchronous_commit on), which benchmarks need to be honest. Without
	// it the server runs with fsync off: a crash loses the throwaway data,
	// which nobody wants back.
	Durable bool
	// Settings are extra server settings (name to value), such as
	// "max_connections".
	Settings map[string]string
}

// Server is a PostgreSQL server for tests: a throwaway one that [Main]
// started, or the one that CAIRN_POSTGRES_URL names.
type Server struct {
	// URL is the connection string of a superuser on the server.
	URL string
	// Durable reports whether the server runs with fsync and synchronous
	// commit on.
	Durable bool

	dir  string    // the cluster's temporary folder, empty for an external server
	cmd  *exec.Cmd // the postmaster
	done chan error
}

// Main starts a server (or connects to CAIRN_POSTGRES_URL), stores it in
// *server, runs the tests and stops the server. It returns the exit code
// for os.Exit. It calls flag.Parse, as TestMain may.
func Main(m *testing.M, opts Options, server **Server) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	s, err := Start(opts)
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "pgtest: FAIL: no PostgreSQL server for the tests (CI=true): %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "pgtest: skipping every test of this package: no PostgreSQL server: %v (install PostgreSQL or set %s)\n", err, URLEnv)
		return 0
	}
	*server = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stopping the server: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// ForTest starts a server for one test, as [Main] does for a whole test
// binary, for packages whose other tests need none. It stops the server at
// the test's cleanup. Without a server the test is skipped with the
// reason, except when the environment variable CI is "true": then it
// fails.
func ForTest(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL server for the tests (CI=true): %v", err)
		}
		t.Skipf("no PostgreSQL server: %v (install PostgreSQL or set %s)", err, URLEnv)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping the PostgreSQL server: %v", err)
		}
	})
	return s
}

// BenchmarksRequested reports whether the test binary was asked to run
// benchmarks (-test.bench). A TestMain uses it to start a
// [Options.Durable] server only when benchmarks will measure it. It calls
// flag.Parse, as TestMain may.
func BenchmarksRequested() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

// Start returns the server named by CAIRN_POSTGRES_URL, or starts a new
// throwaway one. The caller must call [Server.Stop].
func Start(opts Options) (*Server, error) {
	if url := os.Getenv(URLEnv); url != "" {
		s := &Server{URL: url}
		if err := s.ping(10 * time.Second); err != nil {
			return nil, redact.Error(fmt.Errorf("%s=%q: %w", URLEnv, redact.ConnString(url), err), url)
		}
		return s, nil
	}
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	removeStale()
	var lastErr error
	for range 3 { // another process may take the free port before the server does
		s, err := start(bin, opts)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// findBinaries returns the folder holding initdb and postgres: the one
// CAIRN_POSTGRES_BIN names, the one of initdb on PATH, or the newest
// /usr/lib/postgresql/<version>/bin.
func findBinaries() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		for _, name := range []string{"initdb", "postgres"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return "", fmt.Errorf("%s=%q: %w", BinEnv, dir, err)
			}
		}
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no initdb on PATH or in /usr/lib/postgresql/*/bin")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

const dirPrefix = "cairn-pgtest-"

func start(bin string, opts Options) (_ *Server, err error) {
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, Durable: opts.Durable}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	// The owner file lets a later run remove this folder if this process is
	// killed before it can.
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	cred, err := serverCredential(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, lastLines(out, 10))
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"port":                    strconv.Itoa(port),
		"unix_socket_directories": dir,
		"max_connections":         "300",
		"shared_buffers":          "128MB",
		"log_min_messages":        "warning",
	}
	if !opts.Durable {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	args := []string{"-D", data}
	for k, v := range settings {
		args = append(args, "-c", k+"="+v)
	}
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	if cred != nil {
		if err := os.Chown(logFile.Name(), int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// Pdeathsig kills the server when the test binary dies, even by SIGKILL
	// (a test timeout, a killed CI job), so that no server outlives it.
	// The kernel sends it when the thread that forked the server exits, so
	// the server is started from a goroutine locked to a thread that lives
	// as long as the server does.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	s.done = make(chan error, 1)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, after the server
		if err := s.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.done <- s.cmd.Wait()
	}()
	if err := <-started; err != nil {
		s.cmd = nil
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := s.ping(60 * time.Second); err != nil {
		log, _ := os.ReadFile(logFile.Name())
		return nil, fmt.Errorf("%w; server log: %s", err, lastLines(log, 10))
	}
	return s, nil
}

// serverCredential returns the user to run PostgreSQL as: nil (this process's
// user) unless it is root, which PostgreSQL refuses; then the postgres
// system user, who is given dir.
func serverCredential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses root: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user postgres: %w", err)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ping waits until the server accepts connections, or the postmaster exits,
// or limit passes.
func (s *Server) ping(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.URL)
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case exit := <-s.done:
			s.done <- exit
			return fmt.Errorf("postgres exited: %v", exit)
		case <-ctx.Done():
			return fmt.Errorf("server not ready after %s: %w", limit, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NewSchema returns a schema name that no other caller uses, for a store of
// its own on a shared server. It is lower case and a valid identifier.
func (s *Server) NewSchema(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(prefix) + "_" + hex.EncodeToString(b[:])
}

// TempSchema returns a new schema name (see [Server.NewSchema]) and drops
// the schema, with everything a store made in it, when tb ends. Run it
// before the store is opened, so that the store is closed (by its own
// cleanup, which runs first) before the schema is dropped.
func (s *Server) TempSchema(tb testing.TB, prefix string) string {
	schema := s.NewSchema(prefix)
	tb.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			tb.Errorf("pgtest: dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			tb.Errorf("pgtest: dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// Stop stops a throwaway server (fast shutdown, then SIGKILL after 30 s) and
// removes its folder. It does nothing to an external server.
func (s *Server) Stop() error {
	var err error
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown: rolls back sessions, no waiting for clients
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			err = errors.New("postgres did not stop within 30 s; killed")
		}
		s.cmd = nil
	}
	if s.dir != "" {
		err = errors.Join(err, os.RemoveAll(s.dir))
		s.dir = ""
	}
	return err
}

// removeStale removes the folders of throwaway servers whose test binary
// was killed: their servers died with it (Pdeathsig), their files did not.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
