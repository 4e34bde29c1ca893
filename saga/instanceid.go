package saga

import (
	"fmt"

	"github.com/cairn-es/cairn/eventstore"
)

// InstanceFrom returns the ID of the instance that event, from origin
// from, goes to, by its mapping's Instance or InstanceFrom function: the
// instance [Runner.Deliver] would step for a delivery of that source and
// sequence.
func (r *Runner[S]) InstanceFrom(event any, from Origin) (string, error) {
	m := r.e.t.events[typeOf(event)]
	if m == nil {
		return "", fmt.Errorf("%w: saga %q maps no event of type %T", eventstore.ErrInvalidArgument, r.e.t.name, event)
	}
	return instanceOf(m, event, from)
}

// instanceOf runs a mapping's Instance function, which is user code: a
// panic or an empty ID is an error.
func instanceOf[S any](m *eventMapping[S], v any, from Origin) (id string, err error) {
	err = guard(func() error {
		id = m.instance(deref(v), from)
		return nil
	})
	if err == nil && id == "" {
		err = fmt.Errorf("%w: the mapping of %s found no instance (an empty instance ID)", eventstore.ErrInvalidArgument, m.goType)
	}
	return id, err
}
