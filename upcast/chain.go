package upcast

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Limits that keep one bad event, or an unvalidated chain, from running a
// reader out of time or memory.
const (
	// MaxSteps is the most steps Apply runs for one stored event.
	MaxSteps = 1000
	// MaxParts is the most events Apply yields for one stored event.
	MaxParts = 1000
)

// Chain is a set of upcaster steps, at most one per (type, version). The
// zero value is an empty chain, ready to use.
//
// Add steps and call [Chain.Validate] during set-up, from one goroutine;
// after that, Apply is safe for concurrent use.
type Chain struct {
	steps map[Key]*Step
}

// Add adds steps to the chain. A malformed step, or a second step for a
// (type, version) already in the chain, is a [*ChainError] matching
// [ErrInvalidStep] or [ErrDuplicateStep]; the other steps are added.
func (c *Chain) Add(steps ...Step) error {
	if c.steps == nil {
		c.steps = make(map[Key]*Step, len(steps))
	}
	var errs []error
	for _, s := range steps {
		if reason := s.check(); reason != "" {
			errs = append(errs, &ChainError{Key: s.from, Step: s.String(), Reason: reason, Err: ErrInvalidStep})
			continue
		}
		if old, dup := c.steps[s.from]; dup {
			errs = append(errs, &ChainError{Key: s.from, Step: s.String(),
				Reason: "applies to the same type and version as step " + old.String(), Err: ErrDuplicateStep})
			continue
		}
		s.into = slices.Clone(s.into)
		c.steps[s.from] = &s
	}
	return joinErrors(errs)
}

// Len returns the number of steps in the chain.
func (c *Chain) Len() int { return len(c.steps) }

// Has reports whether a step applies to k.
func (c *Chain) Has(k Key) bool {
	_, ok := c.steps[k]
	return ok
}

// Steps returns the chain's steps, sorted by type and version.
func (c *Chain) Steps() []Step {
	out := make([]Step, 0, len(c.steps))
	for _, k := range c.sortedKeys() {
		out = append(out, *c.steps[k])
	}
	return out
}

// NewestVersion returns the highest version of name that some step
// applies to, and whether there is one.
func (c *Chain) NewestVersion(name string) (uint32, bool) {
	var newest uint32
	found := false
	for k := range c.steps {
		if k.Type == name && (!found || k.Version > newest) {
			newest, found = k.Version, true
		}
	}
	return newest, found
}

// Apply runs the chain on r and appends the results to dst: r itself when
// no step applies to it, nothing when it is dropped, several events when it
// is split. Each result has a type and version to which no step applies;
// whether the code knows that pair is for the caller to check.
//
// A step that fails, panics, yields a part it did not declare with
// [Step.Into], or a chain longer than [MaxSteps] or wider than [MaxParts],
// returns a [*StepError]; dst is then returned as it was given.
func (c *Chain) Apply(dst []Raw, r Raw) ([]Raw, error) {
	if len(c.steps) == 0 {
		return append(dst, r), nil
	}
	run := run{steps: MaxSteps, start: len(dst), input: r.Key()}
	out, err := c.apply(dst, r, &run, false)
	if err != nil {
		clear(out[len(dst):]) // the caller keeps the backing array
		return dst, err
	}
	return out, nil
}

// run is the state of one Apply: what is left of its budget, and where
// its results start in dst.
type run struct {
	steps int
	start int
	input Key
}

// apply runs steps on r until none applies. owned says whether r's
// metadata is already a private copy that a step function may change.
func (c *Chain) apply(dst []Raw, r Raw, run *run, owned bool) ([]Raw, error) {
	// fields holds r's JSON object between consecutive TransformJSON steps;
	// while it is set, r.Data is stale.
	var fields map[string]json.RawMessage
	for {
		s, ok := c.steps[r.Key()]
		if !ok {
			if len(dst)-run.start >= MaxParts {
				return dst, &StepError{Step: "(chain)", Input: run.input,
					Err: fmt.Errorf("yields more than %d events", MaxParts)}
			}
			return append(dst, r), nil
		}
		if run.steps--; run.steps < 0 {
			return dst, &StepError{Step: s.String(), Input: r.Key(),
				Err: fmt.Errorf("the chain runs more than %d steps: is it a cycle that was never validated?", MaxSteps)}
		}
		switch s.kind {
		case KindDrop:
			return dst, nil
		case KindRename:
			r.Type, r.Version = s.to.Type, s.to.Version
		case KindTransform:
			if s.editJSON != nil {
				var err error
				if fields, err = editFields(s, r, fields); err != nil {
					return dst, err
				}
				r.Type, r.Version = s.to.Type, s.to.Version
				if next, ok := c.steps[r.Key()]; ok && next.editJSON != nil {
					continue // the next step edits the same fields: encode once, after it
				}
				if r.Data, err = encodeFields(fields); err != nil {
					return dst, &StepError{Step: s.String(), Input: s.from, Err: err}
				}
				fields = nil
				continue
			}
			if !owned {
				r.Metadata, owned = r.Metadata.Clone(), true
			}
			next, err := callTransform(s, r)
			if err != nil {
				return dst, err
			}
			if metadataIsZero(next.Metadata) {
				next.Metadata = r.Metadata
			}
			next.Type, next.Version = s.to.Type, s.to.Version
			r = next
		case KindSplit:
			if !owned {
				r.Metadata = r.Metadata.Clone()
			}
			parts, err := callSplit(s, r)
			if err != nil {
				return dst, err
			}
			if len(parts) > MaxParts {
				return dst, &StepError{Step: s.String(), Input: r.Key(),
					Err: fmt.Errorf("yields %d events, more than the limit of %d", len(parts), MaxParts)}
			}
			for i, p := range parts {
				if s.into != nil && !slices.Contains(s.into, p.Key()) {
					return dst, &StepError{Step: s.String(), Input: r.Key(),
						Err: fmt.Errorf("part %d is %s, which the step does not declare in Into", i, p.Key())}
				}
				// Every part gets its own copy, so that a later step on one
				// cannot change its siblings through a shared map.
				if metadataIsZero(p.Metadata) {
					p.Metadata = r.Metadata.Clone()
				} else {
					p.Metadata = p.Metadata.Clone()
				}
				if dst, err = c.apply(dst, p, run, true); err != nil {
					return dst, err
				}
			}
			return dst, nil
		}
	}
}

func callTransform(s *Step, r Raw) (out Raw, err error) {
	in := r.Key()
	defer func() {
		if p := recover(); p != nil {
			err = &StepError{Step: s.String(), Input: in, Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	out, err = s.transform(r)
	if err != nil {
		return Raw{}, &StepError{Step: s.String(), Input: in, Err: err}
	}
	return out, nil
}

// editFields runs a TransformJSON step on fields, parsing r's data first
// unless the previous step left them parsed.
func editFields(s *Step, r Raw, fields map[string]json.RawMessage) (_ map[string]json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &StepError{Step: s.String(), Input: s.from, Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	if fields == nil {
		if fields, err = JSONFields(r.Data); err != nil {
			return nil, &StepError{Step: s.String(), Input: s.from, Err: err}
		}
	}
	if err := s.editJSON(fields); err != nil {
		return nil, &StepError{Step: s.String(), Input: s.from, Err: err}
	}
	return fields, nil
}

func callSplit(s *Step, r Raw) (parts []Raw, err error) {
	in := r.Key()
	defer func() {
		if p := recover(); p != nil {
			err = &StepError{Step: s.String(), Input: in, Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	parts, err = s.split(r)
	if err != nil {
		return nil, &StepError{Step: s.String(), Input: in, Err: err}
	}
	return parts, nil
}

func (c *Chain) sortedKeys() []Key {
	keys := make([]Key, 0, len(c.steps))
	for k := range c.steps {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

func compareKeys(a, b Key) int {
	if a.Type != b.Type {
		if a.Type < b.Type {
			return -1
		}
		return 1
	}
	switch {
	case a.Version < b.Version:
		return -1
	case a.Version > b.Version:
		return 1
	}
	return 0
}
