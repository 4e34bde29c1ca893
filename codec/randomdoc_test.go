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

// broken returns doc and the ways the differential tests break a document
// around it: cut short at random, trailed by garbage or a comma (syntax
// that encoding/json refuses before it decodes anything), padded with
// spaces, and nested in an array and in an object.
func broken(r *rand.Rand, doc string) []string {
	return []string{doc, doc[:r.IntN(len(doc)+1)], doc + "x", doc + ",", " " + doc + " ", "[" + doc + "]", `{"a":` + doc + `}`}
}
