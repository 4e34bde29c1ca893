package upcast

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Kind says what a [Step] does.
type Kind uint8

// The kinds of step, one per constructor.
const (
	KindTransform Kind = iota + 1
	KindRename
	KindSplit
	KindDrop
)

// String returns the kind's name as error messages use it: "transform", ...
func (k Kind) String() string {
	switch k {
	case KindTransform:
		return "transform"
	case KindRename:
		return "rename"
	case KindSplit:
		return "split"
	case KindDrop:
		return "drop"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Step is one upcaster: it applies to every event whose type and version
// are [Step.From]. Build steps with [Transform], [Rename], [Split] and
// [Drop]; the zero Step is invalid.
type Step struct {
	kind      Kind
	from      Key
	to        Key   // Transform and Rename
	into      []Key // Split, when declared with [Step.Into]
	transform func(Raw) (Raw, error)
	editJSON  func(map[string]json.RawMessage) error // TransformJSON
	split     func(Raw) ([]Raw, error)
}

// Transform returns a step that rewrites the data of version from of type
// name into version from+1, keeping the name. The result's Type and
// Version are set by the step, whatever fn returns; if fn returns zero
// Metadata, the input's is kept, so fn may build its result from scratch.
func Transform(name string, from uint32, fn func(Raw) (Raw, error)) Step {
	to := from + 1
	if from == math.MaxUint32 {
		to = from // rejected by check
	}
	return Step{kind: KindTransform, from: Key{name, from}, to: Key{name, to}, transform: fn}
}

// Rename returns a step that gives events of (oldName, oldVersion) the type
// newName and version newVersion, with their data unchanged. Chain it with
// a [Transform] of newName when the layout changes too.
func Rename(oldName string, oldVersion uint32, newName string, newVersion uint32) Step {
	return Step{kind: KindRename, from: Key{oldName, oldVersion}, to: Key{newName, newVersion}}
}

// Split returns a step that turns one event of (name, version) into the
// events fn returns, in order; each of them then goes on through the chain
// by its own type and version. A part with zero Metadata gets the input's.
// Returning no parts drops the event.
//
// Declare the (type, version) pairs fn can return with [Step.Into], so that
// [Chain.Validate] can check that they lead somewhere, and Apply rejects
// any other.
func Split(name string, version uint32, fn func(Raw) ([]Raw, error)) Step {
	return Step{kind: KindSplit, from: Key{name, version}, split: fn}
}

// Drop returns a step that removes events of (name, version) from what
// readers see. They stay in the stream.
func Drop(name string, version uint32) Step {
	return Step{kind: KindDrop, from: Key{name, version}}
}

// Into declares the (type, version) pairs a [Split] step yields. It
// returns a copy of s; on other kinds of step it makes the step invalid.
func (s Step) Into(keys ...Key) Step {
	s.into = append(append([]Key(nil), s.into...), keys...)
	if s.into == nil {
		s.into = []Key{} // declared, but empty: the split may only drop
	}
	return s
}

// Kind returns what the step does.
func (s Step) Kind() Kind { return s.kind }

// From returns the type and version the step applies to.
func (s Step) From() Key { return s.from }

// String describes the step for error messages.
func (s Step) String() string {
	switch s.kind {
	case KindTransform, KindRename:
		return fmt.Sprintf("%s %s -> %s", s.kind, s.from, s.to)
	case KindSplit:
		if s.into != nil {
			parts := make([]string, len(s.into))
			for i, k := range s.into {
				parts[i] = k.String()
			}
			return fmt.Sprintf("split %s -> [%s]", s.from, strings.Join(parts, ", "))
		}
		return fmt.Sprintf("split %s", s.from)
	}
	return fmt.Sprintf("%s %s", s.kind, s.from)
}

// outputs returns the keys the step can lead to, as far as they are known
// before it runs.
func (s *Step) outputs() []Key {
	switch s.kind {
	case KindTransform, KindRename:
		return []Key{s.to}
	case KindSplit:
		return s.into
	}
	return nil
}

// typeProblem says what is wrong with a step's type name, by the rule of
// stored type names (storekit.ValidateType), or "".
func typeProblem(name string) string {
	var bad *eventstore.InvalidArgumentError
	if errors.As(storekit.ValidateType(name), &bad) {
		return bad.Reason
	}
	return ""
}

// check reports what is wrong with s on its own, without the chain.
func (s *Step) check() string {
	switch {
	case s.kind < KindTransform || s.kind > KindDrop:
		return "is not a step: build steps with Transform, Rename, Split or Drop"
	case typeProblem(s.from.Type) != "":
		return "has a type name that " + typeProblem(s.from.Type)
	case s.kind == KindTransform && s.transform == nil:
		return "has a nil function"
	case s.kind == KindTransform && s.from.Version == math.MaxUint32:
		return "transforms the largest version: there is no next one"
	case s.kind == KindSplit && s.split == nil:
		return "has a nil function"
	case s.kind != KindSplit && s.into != nil:
		return "declares Into outputs, but only a split has them"
	case s.kind == KindRename && typeProblem(s.to.Type) != "":
		return "renames to a type name that " + typeProblem(s.to.Type)
	case s.kind == KindRename && s.to == s.from:
		return "renames to itself"
	}
	for _, k := range s.into {
		if reason := typeProblem(k.Type); reason != "" {
			return "declares an output whose type name " + reason
		}
	}
	return ""
}
