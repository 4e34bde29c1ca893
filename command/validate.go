package command

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// validate refuses a message before anything is loaded or decided, naming
// the field of Message that is wrong: the bus copies ID, CorrelationID,
// CausationID and Extra into the events' metadata, where the store would
// refuse them as "command ID", "correlation ID", ... after the aggregate
// had decided, and with the ID copied three times into the size.
func (m *Message) validate() error {
	bad := func(field, reason string) error {
		return &eventstore.InvalidArgumentError{Index: -1, Field: field, Reason: reason}
	}
	if m.Command == nil {
		return bad("Message.Command", "is nil")
	}
	if v := reflect.ValueOf(m.Command); v.Kind() == reflect.Pointer && v.IsNil() {
		return bad("Message.Command", fmt.Sprintf("is a nil %T", m.Command))
	}
	if m.RecordRejection && m.ID == "" {
		return bad("Message.ID", "is empty, and RecordRejection is set: a recorded rejection is found again by its command ID, which a new random ID never is")
	}
	if err := m.checkReserved(); err != nil {
		return err
	}
	err := storekit.ValidateMetadata(eventstore.Metadata{
		CorrelationID: m.CorrelationID, CausationID: m.CausationID, CommandID: m.ID, Extra: m.Extra,
	})
	var invalid *eventstore.InvalidArgumentError
	if !errors.As(err, &invalid) {
		return err
	}
	field := map[string]string{
		"correlation ID": "Message.CorrelationID",
		"causation ID":   "Message.CausationID",
		"command ID":     "Message.ID",
		"metadata":       "Message.Extra",
	}[invalid.Field]
	return bad(field, invalid.Reason)
}

// checkReserved refuses Extra keys that only Cairn sets (its trace context,
// a command's type): the bus appends as Cairn's own writer, which the
// store trusts with them. The bus checks before its middleware runs and
// again after, at the append, as middleware may add to Extra.
func (m *Message) checkReserved() error {
	for k := range m.Extra {
		if strings.HasPrefix(k, codec.ReservedPrefix) {
			return &eventstore.InvalidArgumentError{Index: -1, Field: "Message.Extra",
				Reason: fmt.Sprintf("key %q starts with %q, which is reserved for Cairn's own metadata", k, codec.ReservedPrefix)}
		}
	}
	return nil
}
