package upcast

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Current tells [Chain.Validate] which version of a type name the code
// registers, if any: the version every chain for that name must end at.
type Current func(name string) (version uint32, ok bool)

// Validate checks the whole chain against the types the code registers,
// once, at set-up. It reports every problem it finds, each a [*ChainError]
// naming the type and versions, joined:
//
//   - [ErrInvalidStep]: a step applies to the current version of its type
//     (it would hide the registered type), or to a version newer than it.
//   - [ErrGap]: a type has a step for some old version and the versions
//     between it and the next step, or the current version, have none
//     (v1->v2 and v3->v4, but no v2->v3).
//   - [ErrDeadEnd]: a step leads to a (type, version) that is neither
//     current nor upcast further.
//   - [ErrCycle]: following steps from some (type, version) comes back to it.
//
// The outputs of a [Split] are checked when they are declared with
// [Step.Into]; undeclared parts are checked when they are read.
func (c *Chain) Validate(current Current) error {
	var errs []error
	keys := c.sortedKeys()

	// Steps against the registered versions.
	misplaced := map[Key]bool{}
	for _, k := range keys {
		s := c.steps[k]
		cur, ok := current(k.Type)
		if !ok || k.Version < cur {
			continue
		}
		misplaced[k] = true
		reason := fmt.Sprintf("applies to v%d, the current version of %q: a step there would hide the registered type", k.Version, k.Type)
		if k.Version > cur {
			reason = fmt.Sprintf("applies to v%d, newer than the current version v%d of %q: steps only bring old versions forward", k.Version, cur, k.Type)
		}
		errs = append(errs, &ChainError{Key: k, Step: s.String(), Err: ErrInvalidStep, Reason: reason})
	}

	// Gaps: from a type's oldest step to its newest step, or to its current
	// version, every version needs a step.
	byType := map[string][]uint32{}
	for _, k := range keys {
		byType[k.Type] = append(byType[k.Type], k.Version)
	}
	names := make([]string, 0, len(byType))
	for name := range byType {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		versions := byType[name] // sorted, as keys are
		last := versions[len(versions)-1]
		cur, registered := current(name)
		if registered {
			// Steps from the current version on are reported above.
			last = cur
			versions = versions[:countBelow(versions, cur)]
			if len(versions) == 0 {
				continue
			}
		}
		for i, v := 0, versions[0]; v < last; v++ {
			if i < len(versions) && versions[i] == v {
				i++
				continue
			}
			// Report a run of missing versions once.
			end := v
			for end+1 < last && (i >= len(versions) || versions[i] != end+1) {
				end++
			}
			errs = append(errs, &ChainError{Key: Key{name, v}, Err: ErrGap,
				Reason: gapReason(name, v, end, versions, cur, registered)})
			v = end
		}
	}

	// Every declared output must lead to a current version or to another step.
	for _, k := range keys {
		s := c.steps[k]
		if misplaced[k] {
			continue // reported above; where it leads does not matter
		}
		for _, out := range s.outputs() {
			if c.Has(out) {
				continue
			}
			cur, registered := current(out.Type)
			switch {
			case registered && out.Version == cur:
				continue
			case registered && out.Version > cur:
				errs = append(errs, &ChainError{Key: k, Step: s.String(), Err: ErrDeadEnd,
					Reason: fmt.Sprintf("leads to %s, newer than the current version v%d of %q", out, cur, out.Type)})
			case inGapRange(byType[out.Type], out.Version, cur, registered):
				continue // reported as a gap of out.Type above
			case registered:
				errs = append(errs, &ChainError{Key: k, Step: s.String(), Err: ErrGap,
					Reason: fmt.Sprintf("leads to %s, and no step brings v%d of %q to the current v%d", out, out.Version, out.Type, cur)})
			default:
				errs = append(errs, &ChainError{Key: k, Step: s.String(), Err: ErrDeadEnd,
					Reason: fmt.Sprintf("leads to %s, which is not a registered type and version and has no step", out)})
			}
		}
	}

	errs = append(errs, c.cycles(keys)...)
	return joinErrors(errs)
}

func countBelow(sorted []uint32, v uint32) int {
	n, _ := slices.BinarySearch(sorted, v)
	return n
}

// inGapRange reports whether v lies between a type's oldest and newest
// step, where the gap check has already reported a missing step.
func inGapRange(versions []uint32, v, cur uint32, registered bool) bool {
	if len(versions) == 0 {
		return false
	}
	upper := versions[len(versions)-1]
	if registered {
		upper = cur
	}
	return v > versions[0] && v < upper
}

func gapReason(name string, from, to uint32, versions []uint32, cur uint32, registered bool) string {
	missing := fmt.Sprintf("v%d", from)
	if to > from {
		missing = fmt.Sprintf("v%d to v%d", from, to)
	}
	have := make([]string, len(versions))
	for i, v := range versions {
		have[i] = fmt.Sprintf("v%d", v)
	}
	target := "no version of it is registered"
	if registered {
		target = fmt.Sprintf("the current version is v%d", cur)
	}
	return fmt.Sprintf("no step for %s of %q: steps exist for %s and %s", missing, name, strings.Join(have, ", "), target)
}

// cycles finds every cycle among the steps' declared outputs, each
// reported once, from its smallest key.
func (c *Chain) cycles(keys []Key) []error {
	const (
		unseen = iota
		onPath
		done
	)
	state := make(map[Key]int, len(keys))
	var errs []error
	var path []Key
	var visit func(k Key)
	visit = func(k Key) {
		state[k] = onPath
		path = append(path, k)
		for _, out := range c.steps[k].outputs() {
			if !c.Has(out) {
				continue
			}
			switch state[out] {
			case unseen:
				visit(out)
			case onPath:
				loop := path[slices.Index(path, out):]
				names := make([]string, 0, len(loop)+1)
				for _, l := range loop {
					names = append(names, l.String())
				}
				names = append(names, out.String())
				errs = append(errs, &ChainError{Key: out, Step: c.steps[path[len(path)-1]].String(), Err: ErrCycle,
					Reason: "closes the cycle " + strings.Join(names, " -> ")})
			}
		}
		path = path[:len(path)-1]
		state[k] = done
	}
	for _, k := range keys {
		if state[k] == unseen {
			visit(k)
		}
	}
	return errs
}

// joinErrors is errors.Join that returns the only error itself, so that a
// single problem reads as one and errors.As finds it without unwrapping a
// join.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}
