package projection

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// TxHandlers is a [TxHandler] made of one typed function per event type, for
// a read model that several event types change: build it with [OnTx], pass
// its Handle method to [NewTx], and its Filter to the consumer's options.
// Values of types with no function are ignored. The zero value is empty and
// ready to use; it is not safe to add functions while a consumer runs it.
type TxHandlers[Tx any] struct {
	fns map[reflect.Type]TxHandler[Tx]
	// names return the registered name of each type, for Filter.
	names []func(reg *codec.Registry) (string, bool)
	types []reflect.Type
}

// OnTx adds fn as the function of the values of type T. A second function
// for one type is an error wrapping [eventstore.ErrInvalidArgument].
func OnTx[Tx, T any](h *TxHandlers[Tx], fn func(ctx context.Context, tx Tx, v T, d codec.Decoded) error) error {
	t := reflect.TypeFor[T]()
	switch {
	case fn == nil:
		return fmt.Errorf("%w: a nil handler for %s", eventstore.ErrInvalidArgument, t)
	case h.fns[t] != nil:
		return fmt.Errorf("%w: %s is handled twice", eventstore.ErrInvalidArgument, t)
	}
	if h.fns == nil {
		h.fns = make(map[reflect.Type]TxHandler[Tx])
	}
	h.fns[t] = func(ctx context.Context, tx Tx, d codec.Decoded) error { return fn(ctx, tx, d.Value.(T), d) }
	h.types = append(h.types, t)
	h.names = append(h.names, func(reg *codec.Registry) (string, bool) {
		name, _, ok := codec.NameOf[T](reg)
		return name, ok
	})
	return nil
}

// Handle calls the function of d's value's type, if there is one.
func (h *TxHandlers[Tx]) Handle(ctx context.Context, tx Tx, d codec.Decoded) error {
	if fn := h.fns[reflect.TypeOf(d.Value)]; fn != nil {
		return fn(ctx, tx, d)
	}
	return nil
}

// Filter returns the filter that selects the stored events these functions
// handle: the names reg registers their types under, and every older name
// that upcasts to one of them (see [codec.Registry.SourceTypes]). A type
// that reg does not register is an error naming it.
func (h *TxHandlers[Tx]) Filter(reg *codec.Registry) (eventstore.Filter, error) {
	var names []string
	for i, name := range h.names {
		n, ok := name(reg)
		if !ok {
			return eventstore.Filter{}, fmt.Errorf("%w: %s has a handler and is not registered with the codec", eventstore.ErrInvalidArgument, h.types[i])
		}
		names = append(names, n)
	}
	types := reg.SourceTypes(names...)
	slices.Sort(types)
	return eventstore.Filter{Types: slices.Compact(types)}, nil
}

// Handlers is [TxHandlers] for a plain [Handler]: build it with [On], pass
// its Handle method to [New].
type Handlers struct {
	tx TxHandlers[struct{}]
}

// On adds fn as the function of the values of type T. A second function for
// one type is an error wrapping [eventstore.ErrInvalidArgument].
func On[T any](h *Handlers, fn func(ctx context.Context, v T, d codec.Decoded) error) error {
	if fn == nil {
		return OnTx[struct{}, T](&h.tx, nil)
	}
	return OnTx(&h.tx, func(ctx context.Context, _ struct{}, v T, d codec.Decoded) error { return fn(ctx, v, d) })
}

// Handle calls the function of d's value's type, if there is one.
func (h *Handlers) Handle(ctx context.Context, d codec.Decoded) error {
	return h.tx.Handle(ctx, struct{}{}, d)
}

// Filter is [TxHandlers.Filter].
func (h *Handlers) Filter(reg *codec.Registry) (eventstore.Filter, error) { return h.tx.Filter(reg) }
