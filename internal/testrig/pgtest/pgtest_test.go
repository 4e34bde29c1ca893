package pgtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var server *Server

func TestMain(m *testing.M) {
	os.Exit(Main(m, Options{}, &server))
}

// TestMissingServerSkipsOnlyOutsideCI runs this test binary again as a child
// whose binaries folder is empty: without CI it must print one line and
// exit 0 having run no test; with CI=true it must fail.
func TestMissingServerSkipsOnlyOutsideCI(t *testing.T) {
	if os.Getenv(URLEnv) != "" {
		t.Skip("the child would use " + URLEnv)
	}
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestServerAcceptsConnectionsWithRequestedDurability$", "-test.v")
		cmd.Env = append(os.Environ(), BinEnv+"="+t.TempDir(), "CI="+ci)
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if ci == "true" {
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "CI=true must fail: %s", out)
			assert.Equal(t, 1, exit.ExitCode())
			assert.Contains(t, string(out), "FAIL")
		} else {
			require.NoError(t, err, "%s", out)
			assert.Len(t, lines, 1, "one line saying why: %s", out)
			assert.Contains(t, lines[0], "skipping")
		}
		assert.NotContains(t, string(out), "=== RUN", "no test ran")
	}
}

func TestServerAcceptsConnectionsWithRequestedDurability(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, server.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var fsync string
	require.NoError(t, conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync))
	if os.Getenv(URLEnv) == "" {
		assert.Equal(t, "off", fsync, "functional-test servers run without fsync")
	}
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	assert.Equal(t, 1, one)
}

func TestNewSchemaNamesDiffer(t *testing.T) {
	a, b := server.NewSchema("T"), server.NewSchema("T")
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^t_[0-9a-f]{12}$`, a)
}

func TestBenchmarksRequestedReadsTheBenchFlag(t *testing.T) {
	assert.False(t, BenchmarksRequested(), "go test without -bench")
}
