package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// TestOpenNeverQuotesAPassword: issue 22, finding 1. Open passed pgx's
// parse error on, and pgx hides passwords on a best-effort basis only: of
// these strings, a '?password=' with a bad sslmode, 'password = x' with
// spaces and an unescaped '@' came back with the password in clear. No
// error of Open quotes one now; one that does not parse is an
// InvalidArgumentError naming the connection string.
func TestOpenNeverQuotesAPassword(t *testing.T) {
	for _, c := range []struct {
		conn, password string
		parses         bool
	}{
		{"postgres://app@127.0.0.1:1/events?password=hunter2&sslmode=nonsense", "hunter2", false},
		{"host=127.0.0.1 port=1 user=app password = spaced-secret dbname=events sslmode=bogus", "spaced-secret", false},
		{"postgres://app:p@ss-w0rd@127.0.0.1:notaport/events", "p@ss-w0rd", false},
		{"postgresql://app:p%40ss%2Fw0rd@127.0.0.1:1/events?sslmode=bogus", "p@ss/w0rd", false},
		{"host=127.0.0.1 port=1 password='with spaces' user=app connect_timeout=bogus", "with spaces", false},
		{"postgres://app:refused-secret@127.0.0.1:1/events?sslmode=disable&connect_timeout=2", "refused-secret", true},
	} {
		t.Run(c.conn, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := postgres.Open(ctx, c.conn, postgres.Options{})
			if s != nil {
				_ = s.Close()
			}
			require.Error(t, err)
			assert.NotContains(t, err.Error(), c.password)
			if !c.parses {
				assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
				var bad *eventstore.InvalidArgumentError
				require.ErrorAs(t, err, &bad)
				assert.Equal(t, "connection string", bad.Field)
			}
		})
	}
}
