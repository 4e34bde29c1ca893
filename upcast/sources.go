package upcast

import "slices"

// Sources returns every type name whose stored events the chain may turn
// into one of names, names included, sorted. A subscriber that filters by
// type needs them all: a store filters by the stored type name, before any
// upcasting.
//
// A [Split] that does not declare its outputs with [Step.Into] may yield
// anything, so its type is always included: a filter that lets through
// too much costs a decode, one that lets through too little loses events.
func (c *Chain) Sources(names ...string) []string {
	into := map[string][]string{} // output type -> types that lead to it
	var open []string             // undeclared splits
	for k, s := range c.steps {
		if s.kind == KindSplit && s.into == nil {
			open = append(open, k.Type)
			continue
		}
		for _, out := range s.outputs() {
			into[out.Type] = append(into[out.Type], k.Type)
		}
	}
	seen := map[string]bool{}
	queue := append(slices.Clone(names), open...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		queue = append(queue, into[name]...)
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
