package sim

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/cairn-es/cairn/saga"
)

// tabHandlers are the tab saga's handlers in version v of the code.
type tabHandlers struct{ v int }

// errFlaw is version 1's failure on a message flawed with flawFail.
var errFlaw = errors.New("tab: version 1 cannot handle this message")

// bloat is what a flawBloat message makes version 1 keep in the state:
// more than a step record may hold (saga.MaxStepSize).
var bloat = strings.Repeat("b", saga.MaxStepSize)

// take checks and counts message name in the state: it must not have been
// handled in this history before, and an ordered one (ordered) must come
// after every ordered message of its source handled so far.
func take(s *Tab, source string, seq uint64, ordered bool) string {
	name := msgName(source, seq)
	if s.Seen == nil {
		s.Seen, s.Next = map[string]int{}, map[string]uint64{}
	}
	if s.Seen[name] > 0 {
		s.problem("%s handled again", name)
	}
	s.Seen[name]++
	if ordered {
		if seq < s.Next[source] {
			s.problem("%s handled after a later message of its source (next was %d)", name, s.Next[source])
		}
		s.Next[source] = max(s.Next[source], seq+1)
	}
	return name
}

// flawed applies a message's flaw, as version 1 of the code meets it.
func (h tabHandlers) flawed(s *Tab, flaw string, out *saga.Output) error {
	if h.v >= 2 {
		return nil
	}
	switch flaw {
	case flawFail:
		return errFlaw
	case flawBloat:
		s.Bloat = bloat
	case flawZero:
		out.ScheduleAt("y", time.Time{}, TabDue{Token: "zero"})
	}
	return nil
}

// armIdle re-arms the inactivity timeout: every message moves it.
func armIdle(s *Tab, out *saga.Output, token string) {
	s.Idle = token
	out.ScheduleAfter("idle", tabIdle, TabDue{Token: token, Due: out.Now().Add(tabIdle)})
}

func (h tabHandlers) opened(_ context.Context, s *Tab, e TabOpened, out *saga.Output) error {
	s.ID, s.Close = e.Tab, e.Close
	name := take(s, "feed", 0, true)
	out.Send(Notify{Account: "n-" + e.Tab, Ref: "open"})
	out.ScheduleAfter("remind", tabRemind, TabDue{Token: "remind/1", Due: out.Now().Add(tabRemind)})
	armIdle(s, out, name)
	return nil
}

func (h tabHandlers) item(_ context.Context, s *Tab, e TabItem, out *saga.Output) error {
	if err := h.flawed(s, e.Flaw, out); err != nil {
		return err
	}
	name := take(s, "feed", e.K, true)
	ref := "item/" + uitoa(e.K)
	amount := 10 * int(e.K)
	if h.v >= 2 {
		out.Send(Notify{Account: "n-" + e.Tab, Ref: "receipt/" + uitoa(e.K)})
		amount++
	}
	out.Send(Charge{Account: e.Account, Ref: ref, Amount: amount})
	if h.v < 2 {
		out.Send(Audit{Account: "audit-" + e.Tab, Ref: ref})
		if e.Legacy {
			out.Send(Legacy{Account: "audit-" + e.Tab, Ref: ref})
		}
	}
	// Scheduled and cancelled in one step: it must never fire.
	out.ScheduleAfter("x", time.Minute, TabDue{Token: "x/" + name, Due: out.Now().Add(time.Minute)})
	out.Cancel("x")
	armIdle(s, out, name)
	return nil
}

func (h tabHandlers) tick(_ context.Context, s *Tab, e TabTick, out *saga.Output) error {
	if err := h.flawed(s, e.Flaw, out); err != nil {
		return err
	}
	name := take(s, e.Source, e.Seq, true)
	if e.Account != "" {
		account := e.Account
		if h.v >= 2 && strings.HasPrefix(account, "a-") {
			account = "b-" + account[2:]
		}
		out.Send(Charge{Account: account, Ref: "tick/" + name, Amount: 1})
	}
	armIdle(s, out, name)
	return nil
}

func (h tabHandlers) ping(_ context.Context, s *Tab, e TabPing, out *saga.Output) error {
	name := take(s, e.Source, e.Seq, false)
	s.Ack = name
	out.ScheduleAfter("ack", tabAck, TabDue{Token: name, Due: out.Now().Add(tabAck)})
	armIdle(s, out, name)
	return nil
}

// fired checks a deadline's firing: never early, and once per arming.
func fired(s *Tab, name string, p TabDue, out *saga.Output) {
	if out.Now().Before(p.Due) {
		s.problem("deadline %s (%s) fired at %s, before it was due at %s", name, p.Token, out.Now(), p.Due)
	}
	key := name + "@" + p.Token
	if s.Fired == nil {
		s.Fired = map[string]bool{}
	}
	if s.Fired[key] {
		s.problem("deadline %s (%s) fired twice", name, p.Token)
	}
	s.Fired[key] = true
}

func (h tabHandlers) remind(_ context.Context, s *Tab, p TabDue, out *saga.Output) error {
	fired(s, "remind", p, out)
	s.Reminded++
	out.Send(Notify{Account: "n-" + s.ID, Ref: p.Token})
	if s.Reminded < tabReminders {
		next := "remind/" + uitoa(uint64(s.Reminded+1))
		out.ScheduleAfter("remind", tabRemind, TabDue{Token: next, Due: out.Now().Add(tabRemind)})
	}
	return nil
}

func (h tabHandlers) ack(_ context.Context, s *Tab, p TabDue, out *saga.Output) error {
	fired(s, "ack", p, out)
	if p.Token != s.Ack {
		s.problem("deadline ack (%s) fired after a later ping (%s) rescheduled it", p.Token, s.Ack)
	}
	out.Send(Notify{Account: "n-" + s.ID, Ref: "ack/" + p.Token})
	return nil
}

func (h tabHandlers) idle(_ context.Context, s *Tab, p TabDue, out *saga.Output) error {
	fired(s, "idle", p, out)
	if p.Token != s.Idle {
		s.problem("deadline idle (%s) fired after a later message (%s) rescheduled it", p.Token, s.Idle)
	}
	// The closing charge, sent by the step that completes: its rejection
	// must still be compensated.
	out.Send(Charge{Account: s.Close, Ref: "close", Amount: 1})
	out.Complete()
	return nil
}

// cancelled handles deadlines that are always cancelled or refused when
// scheduled: firing at all is the broken promise.
func (h tabHandlers) cancelled(_ context.Context, s *Tab, p TabDue, _ *saga.Output) error {
	s.problem("deadline %s fired, though it was cancelled in the step that scheduled it", p.Token)
	return nil
}

// rejected compensates a rejected charge: once per charge.
func (h tabHandlers) rejected(_ context.Context, s *Tab, c Charge, _ error, out *saga.Output) error {
	if s.Compensated == nil {
		s.Compensated = map[string]int{}
	}
	if s.Compensated[c.Ref] > 0 {
		s.problem("charge %s compensated again", c.Ref)
	}
	s.Compensated[c.Ref]++
	out.Send(Refund{Account: "a-" + s.ID, Ref: "refund/" + c.Ref})
	return nil
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
