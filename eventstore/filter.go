package eventstore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-es/cairn/internal/names"
)

// Filter selects events for [Store.ReadAll] and [Store.Subscribe]. The zero
// value selects every event. An event matches when its type is one of Types
// (or Types is empty) and its stream starts with one of StreamPrefixes (or
// StreamPrefixes is empty).
//
// Every store checks a filter with [Filter.Validate] before it reads.
type Filter struct {
	Types          []string
	StreamPrefixes []string
}

// Category returns the stream prefix of an aggregate category: streams are
// named "<category>-<id>", so Category("order") is "order-".
func Category(name string) string { return name + "-" }

// Match reports whether e passes the filter.
func (f Filter) Match(e *Event) bool {
	if len(f.Types) > 0 && !slices.Contains(f.Types, e.Type) {
		return false
	}
	if len(f.StreamPrefixes) == 0 {
		return true
	}
	for _, p := range f.StreamPrefixes {
		if strings.HasPrefix(e.StreamID, p) {
			return true
		}
	}
	return false
}

// IsZero reports whether f selects every event.
func (f Filter) IsZero() bool { return len(f.Types) == 0 && len(f.StreamPrefixes) == 0 }

// Validate checks a filter as every store does before a read: at most
// 1,024 types, each a valid event type name (as [Store.Append]
// takes them); at most 1,024 stream prefixes, each at most
// 512 bytes of printable UTF-8 and not starting with "$" (the
// streams that KurrentDB keeps for itself, which no Cairn stream may be
// named). An empty prefix selects every stream. A bad filter is an
// [*InvalidArgumentError] whose Field is "filter type" or "filter stream
// prefix" and whose Reason gives the entry's index.
func (f Filter) Validate() error {
	bad := func(field, reason string) error {
		return &InvalidArgumentError{Index: -1, Field: field, Reason: reason}
	}
	if len(f.Types) > names.MaxFilterTypes {
		return bad("filter types", fmt.Sprintf("list %d types, more than the limit of %d", len(f.Types), names.MaxFilterTypes))
	}
	if len(f.StreamPrefixes) > names.MaxFilterPrefixes {
		return bad("filter stream prefixes", fmt.Sprintf("list %d prefixes, more than the limit of %d", len(f.StreamPrefixes), names.MaxFilterPrefixes))
	}
	for i, typ := range f.Types {
		if reason := names.TypeProblem(typ); reason != "" {
			return bad("filter type", fmt.Sprintf("at index %d %s", i, reason))
		}
	}
	for i, p := range f.StreamPrefixes {
		switch {
		case len(p) > names.MaxStreamLen:
			return bad("filter stream prefix", fmt.Sprintf("at index %d is %d bytes long, more than the limit of %d", i, len(p), names.MaxStreamLen))
		case !names.Printable(p):
			return bad("filter stream prefix", fmt.Sprintf("at index %d, %q, is not printable UTF-8", i, p))
		case strings.HasPrefix(p, "$"):
			return bad("filter stream prefix", fmt.Sprintf(`at index %d, %q, starts with "$", which is reserved for system streams`, i, p))
		}
	}
	return nil
}
