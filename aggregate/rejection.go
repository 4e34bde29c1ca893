package aggregate

import (
	"context"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/trusted"
)

// clipRejection makes rej what is stored: valid UTF-8 (JSON would replace
// the invalid bytes anyway), the reason cut at a rune boundary.
func clipRejection(rej busrepo.Rejection) busrepo.Rejection {
	rej.Reason = strings.ToValidUTF8(rej.Reason, "\uFFFD")
	if len(rej.Reason) > busrepo.MaxRejectionReason {
		cut := busrepo.MaxRejectionReason
		for cut > 0 && !utf8.RuneStart(rej.Reason[cut]) {
			cut--
		}
		rej.Reason = rej.Reason[:cut]
	}
	rej.Command = strings.ToValidUTF8(rej.Command, "\uFFFD")
	return rej
}

// saveRejection is [busrepo.Repo.SaveRejection]: it records that command
// opts.CommandID was rejected, as one event of Cairn's own
// ([busrepo.RejectionType]) with the ID of the command's first event.
func (r *Repository[T, PT]) saveRejection(ctx context.Context, inst *Instance[T, PT], rej busrepo.Rejection, opts busrepo.SaveOptions) (busrepo.Outcome, error) {
	if err := checkInstance(inst); err != nil {
		return busrepo.Outcome{}, err
	}
	if opts.CommandID == "" {
		return busrepo.Outcome{}, &eventstore.InvalidArgumentError{Stream: inst.Stream, Index: -1, Field: "command ID",
			Reason: "is empty: a recorded rejection is found again by its command ID"}
	}
	rej = clipRejection(rej)
	data, err := json.Marshal(rej)
	if err != nil {
		return busrepo.Outcome{}, err // unreachable: two strings
	}
	// Recording a rejection is a step of the dispatch that decided it:
	// traced as a child append.
	actx, op := r.appends.Start(ctx, r.typ.name, inst.Stream, 1, true)
	ev := eventstore.EventData{ID: storekit.CommandEventID(inst.Stream, opts.CommandID, 0), Type: busrepo.RejectionType,
		SchemaVersion: busrepo.RejectionSchemaVersion, Data: data, Metadata: metadata(&op, &opts)}
	telemetry.Fit(&ev)
	res, err := r.store.Append(trusted.Writer(actx), inst.Stream, inst.expected(), ev)
	op.End(actx, res.FirstVersion, err)
	if err != nil {
		return busrepo.Outcome{}, err
	}
	if res.Duplicate {
		return r.storedOutcome(ctx, inst, opts.CommandID, res.FirstVersion)
	}
	e := eventstore.Event{EventData: ev, StreamID: inst.Stream, Version: res.FirstVersion}
	if _, err := r.apply(inst, &e, nil, false); err != nil {
		return busrepo.Outcome{}, err // unreachable: a rejection is not decoded
	}
	r.maybeSnapshot(ctx, inst)
	return busrepo.Outcome{FirstVersion: res.FirstVersion, LastVersion: res.FirstVersion, Position: res.Position, Rejection: &rej,
		CommandType: opts.CommandType}, nil
}
