// Package codec maps Go event types to stable type names and schema
// versions, encodes values for the store, and decodes stored events into
// the Go values the current code expects, upcasting old ones on the way.
//
// Names are explicit and never derived from Go package paths, so that
// renaming or moving a Go type does not break stored data:
//
//	reg := codec.NewRegistry(codec.Options{})
//	codec.Register[OrderPlaced](reg, "order.placed", 2)
//	reg.Upcast(upcast.Transform("order.placed", 1, splitAddress))
//	if err := reg.Validate(); err != nil { ... } // once, at start-up
//
//	data, err := reg.Encode(OrderPlaced{...}) // Type, SchemaVersion, Data
//	values, err := reg.Decode(storedEvent)     // []Decoded, upcast
//
// Decoding looks the stored type name up in a map and calls a closure
// built by [Register] for the registered type (var v T; Unmarshal(data,
// &v)), so it does no reflection of its own; the serializer, JSON by
// default, does what it needs. Events at their current version skip the
// upcaster chain entirely.
//
// An upcaster chain (package upcast) may rename, transform, split or drop
// old events. Every read path (aggregate load, subscriptions, sagas,
// projections) decodes through a Registry and so sees only current types.
// A split event yields several [Decoded] values that all carry the stored
// event's stream version and global position; see [Decoded] for what that
// means for checkpoints.
//
// Snapshots and saga state use the same machinery through
// [Registry.EncodeValue] and [Registry.DecodeValue]: they carry their own
// type name and schema version, and a stored value that the chain cannot
// bring to the current version fails with [ErrNoUpcastPath], the sign to
// discard it and replay.
package codec
