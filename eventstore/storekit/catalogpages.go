package storekit

import (
	"context"
	"iter"
	"strings"
	"unicode/utf8"
)

// NamePageReader reads one page of a [Catalog] listing from a store that
// keeps it sorted by name (a SQL store's primary key or index): up to
// limit items, in byte order of their names, whose names are at least
// from and, when to is not "", below to. from and to are valid UTF-8
// without NUL bytes, so that every store can bind them (PostgreSQL's
// text takes nothing else).
type NamePageReader[T any] func(ctx context.Context, from, to string, limit int) ([]T, error)

// ListNames implements a [Catalog] listing (Streams, Consumers, Snapshots)
// on a [NamePageReader]: it yields the items whose names start with prefix
// and sort after after, in name order, reading page after page so that
// memory stays flat however many there are, and holding nothing of the
// store while the caller ranges. prefix and after may be any strings: the
// range it asks the reader for is the widest that valid names can fall in
// (see [NameRange]), and it drops what the exact byte comparison rules
// out, so that no input is an error and none is taken as a pattern.
func ListNames[T any](ctx context.Context, prefix, after string, name func(T) string, read NamePageReader[T], pageSize int) iter.Seq2[T, error] {
	if pageSize < 2 {
		// Each page after the first starts at the name that ended the last
		// one (inclusive, as the first page's bound is), so a page must hold
		// more than that one name to make progress.
		pageSize = DefaultPageSize
	}
	return func(yield func(T, error) bool) {
		var zero T
		from, to := NameRange(prefix, after)
		for {
			if err := ctx.Err(); err != nil {
				yield(zero, err)
				return
			}
			page, err := read(ctx, from, to, pageSize)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, item := range page {
				n := name(item)
				if n <= after || !strings.HasPrefix(n, prefix) {
					continue
				}
				if !yield(item, nil) {
					return
				}
			}
			if len(page) < pageSize {
				return
			}
			last := name(page[len(page)-1])
			from, after = last, max(after, last)
		}
	}
}

// NameRange returns the range of names, from (inclusive) to to (exclusive;
// "" for no bound), that holds every valid name starting with prefix and
// sorting after after, in byte order. Both are valid UTF-8 without NUL
// bytes, the longest such prefixes of prefix and after and the least name
// above every name that starts with prefix, so that a store can bind them
// where it cannot bind the caller's strings; the range may hold names
// that do not match, which [ListNames] drops.
func NameRange(prefix, after string) (from, to string) {
	p := validPrefix(prefix)
	return max(p, validPrefix(after)), successor(p)
}

// validPrefix returns the longest prefix of s that is valid UTF-8 without
// NUL bytes.
func validPrefix(s string) string {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0 || (r == utf8.RuneError && size == 1) {
			return s[:i]
		}
		i += size
	}
	return s
}

// successor returns the least valid string above every string that starts
// with p (valid UTF-8), or "" when there is none (p is empty, or all its
// runes are the last one). UTF-8's byte order is the order of code points,
// so that is p with its last rune that can grow grown by one, and the
// runes after it cut.
func successor(p string) string {
	for len(p) > 0 {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF: // the surrogates that follow are no runes
			r = 0xE000
		default:
			r++
		}
		return p + string(r)
	}
	return ""
}
