package storekit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// s7Reader is a stream page reader of a synthetic stream of n events,
// with adversarial ways of filling its pages: into dst, into memory of its
// own, growing dst beyond its capacity, and failing after appending.
type s7Reader struct {
	n      int
	big    bool // events of ~1 MiB: pages cut at MaxPageBytes
	own    bool // ignore dst: return fresh memory
	failAt int  // fail (after appending) when the page would hold version failAt; <0 never
	weaks  []weak.Pointer[byte]
}

var errS7 = errors.New("s7: read failed mid-page")

func (r *s7Reader) read(ctx context.Context, dst []eventstore.Event, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	page := dst[:0]
	if r.own {
		page = nil
	}
	size := 0
	for v := int64(from); v >= 0 && v < int64(r.n); {
		// at least 16 bytes: no tiny allocation, which shares its block
		data := []byte(fmt.Sprintf(`{"v":%d,"pad":"................"}`, v))
		if r.big {
			data = make([]byte, storekit.MaxEventSize-16)
			copy(data, fmt.Sprint(v))
		}
		r.weaks = append(r.weaks, weak.Make(&data[0]))
		e := eventstore.Event{StreamID: stream, Version: uint64(v), EventData: eventstore.EventData{Type: "t", SchemaVersion: 1, Data: data,
			Metadata: eventstore.Metadata{Extra: map[string]string{"v": fmt.Sprint(v)}}}}
		page = append(page, e)
		if int(v) == r.failAt {
			return nil, errS7
		}
		size += storekit.PageBytes(&e)
		if storekit.PageFull(len(page), limit, size) {
			break
		}
		if backward {
			v--
		} else {
			v++
		}
	}
	return page, nil
}

type s7Got struct {
	versions []uint64
	datas    []string
	err      error
}

func s7Collect(stop int) (func(eventstore.Event, error) bool, *s7Got) {
	g := &s7Got{}
	return func(e eventstore.Event, err error) bool {
		if err != nil {
			g.err = err
			return false
		}
		g.versions = append(g.versions, e.Version)
		g.datas = append(g.datas, string(e.Data[:min(len(e.Data), 12)])+e.Metadata.Extra["v"])
		return stop <= 0 || len(g.versions) < stop
	}, g
}

// TestReviewS7ReadStreamWithAsReadStreamPagesInto: with one PageBuffer
// kept across reads of every shape, ReadStreamWith yields what ranging
// over ReadStreamPagesInto yields, and after Reset no event data the
// reads made stays reachable from the buffer.
func TestReviewS7ReadStreamWithAsReadStreamPagesInto(t *testing.T) {
	ctx := context.Background()
	var buf storekit.PageBuffer
	type tc struct {
		r    s7Reader
		opts eventstore.ReadOptions
		size int
		stop int
	}
	var cases []tc
	for _, own := range []bool{false, true} {
		for _, n := range []int{0, 1, 5, 7, 8, 9, 2*8 + 3, 1100} {
			for _, fail := range []int{-1, 0, 6, 9, 600} {
				for _, opts := range []eventstore.ReadOptions{eventstore.Forward(0), eventstore.Forward(3), eventstore.Backward(eventstore.End), {From: 2, Limit: 9}} {
					for _, size := range []int{0, 8} {
						for _, stop := range []int{0, 1, 10} {
							cases = append(cases, tc{s7Reader{n: n, own: own, failAt: fail}, opts, size, stop})
						}
					}
				}
			}
		}
		cases = append(cases, tc{s7Reader{n: 11, big: true, own: own, failAt: -1}, eventstore.Forward(0), 0, 0})
		cases = append(cases, tc{s7Reader{n: 11, big: true, own: own, failAt: 6}, eventstore.Forward(0), 0, 0})
	}
	for i, c := range cases {
		what := fmt.Sprintf("case %d: %+v", i, c)
		a, b := c.r, c.r
		ya, ga := s7Collect(c.stop)
		for e, err := range storekit.ReadStreamPagesInto(ctx, "s", c.opts, a.read, c.size) {
			if !ya(e, err) {
				break
			}
		}
		yb, gb := s7Collect(c.stop)
		storekit.ReadStreamWith(ctx, "s", c.opts, b.read, c.size, &buf, yb)
		require.Equal(t, ga.versions, gb.versions, what)
		require.Equal(t, ga.datas, gb.datas, what)
		require.Equal(t, ga.err, gb.err, what)
		if i%7 == 0 || c.r.big || c.r.failAt >= 0 {
			buf.Reset()
			ga, gb = nil, nil
			runtime.GC()
			alive := 0
			for _, w := range b.weaks {
				if w.Value() != nil {
					alive++
				}
			}
			runtime.KeepAlive(&buf)
			assert.Zero(t, alive, "%s: %d of %d events' data reachable after Reset", what, alive, len(b.weaks))
		}
	}
}
