package kurrentdb

import (
	"encoding/json"
	"fmt"

	"github.com/cairn-es/cairn/eventstore"
)

// envelope is what the store keeps in a KurrentDB event's metadata: Cairn's
// metadata, the event's schema version, and, on the last event of an
// append with caller-chosen IDs, the append's nonce (see [Store.Append]).
type envelope struct {
	Schema uint32 `json:"schema_version,omitempty"`
	eventstore.Metadata
	Nonce string `json:"cairn_append,omitempty"`
}

// encodeEnvelope returns the metadata of e as the store writes it.
func encodeEnvelope(e *eventstore.EventData, nonce string) ([]byte, error) {
	return json.Marshal(envelope{Schema: e.SchemaVersion, Metadata: e.Metadata, Nonce: nonce})
}

// decodeEnvelope reads the metadata of the event at version of stream.
// Empty metadata (an event another writer appended without any) is Cairn's
// empty metadata; metadata that is not a JSON object is corrupt.
func decodeEnvelope(stream string, version uint64, raw []byte) (envelope, error) {
	var env envelope
	if len(raw) == 0 {
		return env, nil
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return envelope{}, fmt.Errorf("%w: kurrentdb: event %d of stream %q: metadata is not Cairn's JSON object: %v",
			eventstore.ErrCorrupt, version, stream, err)
	}
	if len(env.Extra) == 0 {
		env.Extra = nil
	}
	return env, nil
}
