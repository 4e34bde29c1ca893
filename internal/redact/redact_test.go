package redact_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cairn-es/cairn/internal/redact"
)

// Connection strings whose passwords must never be printed, among them the
// shapes that pgx's parse errors returned in clear (issue 22, finding 1).
var secretStrings = []struct{ conn, password string }{
	{"postgres://app:s3cret@db.internal:5432/events", "s3cret"},
	{"postgres://app:p@ss@db.internal/events", "p@ss"},                        // an unescaped '@'
	{"postgresql://app:p%40ss%2Fw0rd@db/events?sslmode=bogus", "p@ss/w0rd"},   // escaped, decoded by pgx
	{"postgres://app@db/events?password=hunter2&sslmode=nonsense", "hunter2"}, // a query password, a bad sslmode
	{"postgres://db/events?sslmode=require&password=hun%20ter2", "hun ter2"},  // escaped in the query
	{"host=db user=app password=s3cret-kv dbname=events sslmode=bogus", "s3cret-kv"},
	{"host=db user=app password = spaced dbname=events", "spaced"},   // spaces around '='
	{"host=db password='with spaces' user=app", "with spaces"},       // quoted
	{`host=db password='it\'s' user=app`, "it's"},                    // an escaped quote
	{"host=db PASSWORD=Upper user=app", "Upper"},                     // any case
	{"host=db sslpassword=keypass user=app password=pw2", "keypass"}, // the client key's too
}

func TestSecretsAreMaskedInEveryShape(t *testing.T) {
	for _, c := range secretStrings {
		t.Run(c.conn, func(t *testing.T) {
			masked := redact.ConnString(c.conn)
			assert.NotContains(t, masked, c.password)
			assert.Contains(t, masked, redact.Mask)
			msg := "cannot parse `" + c.conn + "`: failed (password " + c.password + ")"
			assert.NotContains(t, redact.Text(msg, c.conn), c.password)
		})
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	sentinel := errors.New("sentinel")
	conn := "postgres://u:topsecret@h/d"
	err := redact.Error(errors.Join(sentinel, errors.New("bad conn "+conn)), conn)
	assert.ErrorIs(t, err, sentinel)
	assert.False(t, strings.Contains(err.Error(), "topsecret"))
	assert.NoError(t, redact.Error(nil, conn))
}
