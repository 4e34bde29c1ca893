package testserver

import (
	"regexp"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// countWindow is the search window when the client asks for "count"
// (esdb.NoMaxSearchWindow): the server's page size for filtered reads.
const countWindow = 32

// filter is a server-side $all subscription filter: on event type or on
// stream name, by prefixes or by a regular expression. Go's regexp stands in
// for .NET's; for the anchors, classes and alternations an adapter sends,
// they agree. Both search (match anywhere) unless anchored.
type filter struct {
	byType          bool
	prefixes        []string
	re              *regexp.Regexp
	checkpointEvery int
}

func newFilter(o *streams.ReadReq_Options_FilterOptions) (*filter, error) {
	if o == nil {
		return nil, nil
	}
	f := &filter{}
	var expr *streams.ReadReq_Options_FilterOptions_Expression
	switch v := o.GetFilter().(type) {
	case *streams.ReadReq_Options_FilterOptions_EventType:
		f.byType, expr = true, v.EventType
	case *streams.ReadReq_Options_FilterOptions_StreamIdentifier:
		expr = v.StreamIdentifier
	default:
		return nil, status.Error(codes.InvalidArgument, "testserver: filter on neither event type nor stream")
	}
	// Like the server: a regex, when given, wins over prefixes.
	if rx := expr.GetRegex(); rx != "" {
		re, err := regexp.Compile(rx)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "testserver: filter regex: %v", err)
		}
		f.re = re
	} else {
		f.prefixes = expr.GetPrefix()
	}
	window := countWindow
	if m, ok := o.GetWindow().(*streams.ReadReq_Options_FilterOptions_Max); ok && m.Max > 0 {
		window = int(m.Max)
	}
	f.checkpointEvery = window * int(max(o.GetCheckpointIntervalMultiplier(), 1))
	return f, nil
}

func (f *filter) match(r *record) bool {
	s := r.stream
	if f.byType {
		s = r.typ
	}
	if f.re != nil {
		return f.re.MatchString(s)
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
