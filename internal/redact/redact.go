// Package redact hides the passwords of PostgreSQL connection strings in
// the errors and logs Cairn writes. pgx hides them on a best-effort basis
// only (a malformed string comes back in its parse error as it was given),
// so every text that may quote a connection string goes through here.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces each password.
const Mask = "xxxxx"

var (
	// userinfo is the password of a URL: between the user's ':' and the
	// last '@' before the host, so that an unescaped '@' in it is covered.
	userinfo = regexp.MustCompile(`(?i)^[a-z][a-z0-9+.-]*://[^:/?#]*:(.*)@[^@]*$`)
	// query is a password= parameter of a URL's query.
	query = regexp.MustCompile(`(?i)[?&](?:ssl)?password=([^&#]*)`)
	// keyword is a password of the keyword/value form, quoted or not,
	// with or without spaces around '='.
	keyword = regexp.MustCompile(`(?i)(?:^|\s)(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)
)

// Secrets returns the passwords that connection string conn carries, as
// written and, where they differ, decoded (percent-escapes undone, quotes
// taken off), since an error may quote either.
func Secrets(conn string) []string {
	var raw []string
	if m := userinfo.FindStringSubmatch(conn); m != nil {
		raw = append(raw, m[1])
	}
	for _, m := range query.FindAllStringSubmatch(conn, -1) {
		raw = append(raw, m[1])
	}
	for _, m := range keyword.FindAllStringSubmatch(conn, -1) {
		v := m[1]
		raw = append(raw, v)
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			raw = append(raw, strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(v[1:len(v)-1]))
		}
	}
	var out []string
	add := func(s string) {
		for _, o := range out {
			if o == s {
				return
			}
		}
		if s != "" {
			out = append(out, s)
		}
	}
	for _, s := range raw {
		add(s)
		if d, err := url.PathUnescape(s); err == nil {
			add(d)
		}
		if d, err := url.QueryUnescape(s); err == nil {
			add(d)
		}
	}
	return out
}

// Text returns s with every password of connection string conn masked,
// the longest first, so that one password inside another is masked whole.
func Text(s, conn string) string {
	secrets := Secrets(conn)
	for i := range secrets {
		for j := i + 1; j < len(secrets); j++ {
			if len(secrets[j]) > len(secrets[i]) {
				secrets[i], secrets[j] = secrets[j], secrets[i]
			}
		}
	}
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, Mask)
	}
	return s
}

// ConnString returns conn with its passwords masked, to name it in an
// error or a log.
func ConnString(conn string) string { return Text(conn, conn) }

// Error returns err with the passwords of conn masked in its text. The
// error it wraps stays in the chain, for errors.Is and errors.As; use it
// only for errors that carry no connection string of their own in their
// fields.
func Error(err error, conn string) error {
	if err == nil {
		return nil
	}
	return &redacted{text: Text(err.Error(), conn), err: err}
}

type redacted struct {
	text string
	err  error
}

func (e *redacted) Error() string { return e.text }
func (e *redacted) Unwrap() error { return e.err }
