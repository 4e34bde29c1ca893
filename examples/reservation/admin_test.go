package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// adminRun runs the mounted command line in-process and returns its exit
// code and output.
func adminRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), args, cli.Options{Name: "reservation admin", Service: mount,
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// checkAdmin lists and explains the sales a run of the example left in
// the store at storeURL, through the mounted command line.
func checkAdmin(t *testing.T, storeURL string, res *result) {
	t.Helper()
	code, out, stderr := adminRun(t, "--store", storeURL, "sagas", "ls", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	var types []struct {
		Saga      string `json:"saga"`
		Instances int    `json:"instances"`
		Mounted   bool   `json:"mounted"`
		Stats     struct {
			ParkedInstances int `json:"parked_instances"`
		} `json:"stats"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &types), out)
	require.Len(t, types, 1)
	assert.Equal(t, "sale", types[0].Saga)
	assert.True(t, types[0].Mounted)
	assert.Equal(t, len(res.orders), types[0].Instances, "a sale per order")
	assert.Zero(t, types[0].Stats.ParkedInstances)

	o := res.orders[0]
	code, out, stderr = adminRun(t, "--store", storeURL, "sagas", "explain", "sale", o.ID, "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	var x struct {
		Instance  string          `json:"instance"`
		Completed bool            `json:"completed"`
		State     json.RawMessage `json:"state"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &x), out)
	assert.Equal(t, o.ID, x.Instance)
	assert.True(t, x.Completed, "every order ended")
	assert.Contains(t, string(x.State), o.ID)

	code, out, stderr = adminRun(t, "--store", storeURL, "sagas", "explain", "sale", o.ID)
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, out, "saga sale, instance "+o.ID)

	code, _, stderr = adminRun(t, "--store", storeURL, "sagas", "parked", "nosuch")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "mounts sale")
}

// TestAdminOnTheExamplesStore: admin sagas ls and explain read the
// sales a run left in its SQLite file.
func TestAdminOnTheExamplesStore(t *testing.T) {
	dir := t.TempDir()
	res, err := run(context.Background(), testConfig(t, dir, modelV1, 10, 11))
	require.NoError(t, err)
	checkAdmin(t, "sqlite://"+filepath.Join(dir, storeFile), res)
}

// TestRunsOnPostgres runs the example, its sale process included, on a
// PostgreSQL store named by -store, then looks at it with admin.
func TestRunsOnPostgres(t *testing.T) {
	server := pgtest.ForTest(t, pgtest.Options{})
	u, err := url.Parse(server.URL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("schema", server.TempSchema(t, "reservation"))
	u.RawQuery = q.Encode()

	cfg := testConfig(t, t.TempDir(), modelV1, 10, 12)
	cfg.store = u.String()
	res, err := run(context.Background(), cfg)
	require.NoError(t, err)
	assert.Equal(t, 10, res.history.Orders)
	assert.Equal(t, len(res.orders), sum(res.history.Ends), "every order ended")
	checkAdmin(t, cfg.store, res)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
