package codec_test

import "math/rand/v2"

// randomDoc writes random JSON documents for the differential tests: at
// each depth a leaf from values (always past maxDepth, else one time in
// leafOdds), an array of up to two documents (one time in arrayOdds), or an
// object of fewer than members members, named from names and quoted by
// quote.
type randomDoc struct {
	names, values                          []string
	maxDepth, leafOdds, arrayOdds, members int
	quote                                  func(string) string
}

func (g randomDoc) write(r *rand.Rand, depth int) string {
	if depth > g.maxDepth || r.IntN(g.leafOdds) == 0 {
		return g.values[r.IntN(len(g.values))]
	}
	if r.IntN(g.arrayOdds) == 0 {
		s := "["
		for i := range r.IntN(3) {
			if i > 0 {
				s += ","
			}
			s += g.write(r, depth+1)
		}
		return s + "]"
	}
	s := "{"
	for i := range r.IntN(g.members) {
		if i > 0 {
			s += ","
		}
		s += g.quote(g.names[r.IntN(len(g.names))]) + ":" + g.write(r, depth+1)
	}
	return s + "}"
}
