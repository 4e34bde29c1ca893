package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// The tab workload's saga: a tab is opened by a stored event, takes items
// from its own stream in the store and ticks and pings from two outside
// sources (ticks in their source's order, pings in any order), charges
// accounts, and closes when it has been idle for a day. Every handler
// checks what the engine promises it and writes what it finds into the
// state (Problems), which the checker reads: a handler only sees a
// decision that may not be stored (a stale cache, a lost race), and only
// a stored state is evidence.
//
// Two versions of the code run it. Version 2 is the "fixed" one an
// operator deploys and re-drives with: it handles the messages version 1
// fails on, sends a receipt before each item's charge (a command added),
// no longer audits items (one removed), charges one more per item (one
// changed in its payload, under the same ID) and charges ticks to another
// account (one changed in its target, under a new ID), and no longer knows
// the Legacy command type at all.

// Durations of the tab saga.
const (
	// tabIdle closes a tab that took no message for that long: longer than
	// any run's faults, so that it fires in the drain, once every message
	// is in.
	tabIdle = 24 * time.Hour
	// tabRemind is the period of a reminder that re-arms itself, tabReminders
	// times in all.
	tabRemind    = 20 * time.Minute
	tabReminders = 3
	// tabAck is the deadline each ping re-arms.
	tabAck = 5 * time.Minute
)

// Tab is the tab saga's state.
type Tab struct {
	ID string `json:"id"`
	// Close is the account the closing charge goes to.
	Close string `json:"close,omitempty"`
	// Seen counts the handlings of each message, by name (see msgName), in
	// the instance's current history: one each, or none when an operator
	// skipped it or released the gap it was in.
	Seen map[string]int `json:"seen,omitempty"`
	// Next is, per source, the lowest sequence an ordered message of it
	// may have now.
	Next map[string]uint64 `json:"next,omitempty"`
	// Idle and Ack are the tokens of the latest arming of those deadlines;
	// Fired the tokens of the firings.
	Idle     string          `json:"idle,omitempty"`
	Ack      string          `json:"ack,omitempty"`
	Reminded int             `json:"reminded,omitempty"`
	Fired    map[string]bool `json:"fired,omitempty"`
	// Compensated counts the refunds of rejected charges, by charge.
	Compensated map[string]int `json:"compensated,omitempty"`
	// Bloat is what a Bloat message makes version 1 keep: more than a step
	// record may hold.
	Bloat string `json:"bloat,omitempty"`
	// Problems are the broken promises the handlers saw.
	Problems []string `json:"problems,omitempty"`
}

// problem records a broken promise in the state (a few at most).
func (s *Tab) problem(format string, args ...any) {
	if len(s.Problems) < 8 {
		s.Problems = append(s.Problems, fmt.Sprintf(format, args...))
	}
}

// The tab saga's events. TabOpened and TabItem are stored in the tab's
// own stream (feedStream); TabTick and TabPing come from outside.
type (
	TabOpened struct {
		Tab   string
		Close string
	}
	// TabItem is the K-th event of the tab's stream. Account is where its
	// charge goes; Legacy makes version 1 send a Legacy command too.
	TabItem struct {
		Tab     string
		K       uint64
		Account string
		Legacy  bool
		Flaw    string `json:",omitempty"`
		Pad     string `json:",omitempty"`
	}
	TabTick struct {
		Tab, Source string
		Seq         uint64
		Account     string
		Flaw        string `json:",omitempty"`
		Pad         string `json:",omitempty"`
	}
	TabPing struct {
		Tab, Source string
		Seq         uint64
		Pad         string `json:",omitempty"`
	}
	// TabDue is every tab deadline's payload: the token of the arming, and
	// when it is due.
	TabDue struct {
		Token string
		Due   time.Time
	}
)

// Flaws a message may carry, which version 1 cannot handle and version 2
// can.
const (
	flawFail  = "fail"  // the handler returns an error
	flawBloat = "bloat" // the state grows past what a step record may hold
	flawZero  = "zero"  // a deadline scheduled at the zero time
)

// The tab saga's commands, all carried out by the account aggregate
// their Account names.
type (
	Charge struct {
		Account, Ref string
		Amount       int
	}
	Notify struct{ Account, Ref string }
	Refund struct{ Account, Ref string }
	Audit  struct{ Account, Ref string }
	// Legacy is a command type that version 2 of the code no longer
	// knows: the records of version 1 that send it do not decode there.
	Legacy struct{ Account, Ref string }
)

func (c Charge) AggregateID() string { return c.Account }
func (c Notify) AggregateID() string { return c.Account }
func (c Refund) AggregateID() string { return c.Account }
func (c Audit) AggregateID() string  { return c.Account }
func (c Legacy) AggregateID() string { return c.Account }

// Booked is the one event of an account: a command carried out.
type Booked struct {
	Account, Kind, Ref string
	Amount             int
}

// errDeclined is the rejection of every command to a "reject-" account.
var errDeclined = errors.New("account declined")

// Account is the aggregate of the tab saga's commands. An account named
// "reject-..." rejects every command; one named "panic-..." panics on
// every command (a poison command, which the bus fails without a
// rejection). Booked counts nothing: a command applied twice shows as two
// events.
type Account struct{ Booked int }

// book decides every command of an account alike: it books b, unless the
// account rejects or panics.
func (a *Account) book(b Booked) ([]any, error) {
	switch {
	case strings.HasPrefix(b.Account, "reject-"):
		return nil, errDeclined
	case strings.HasPrefix(b.Account, "panic-"):
		panic("the account panics on " + b.Ref)
	}
	return []any{b}, nil
}

// accountBindings bind each command of the tab saga to the Booked event it
// makes, and count the events applied.
var accountBindings = []aggregate.Binding[Account]{
	aggregate.Handles(func(a *Account, _ context.Context, c Charge) ([]any, error) {
		return a.book(Booked{Account: c.Account, Kind: "charge", Ref: c.Ref, Amount: c.Amount})
	}),
	aggregate.Handles(func(a *Account, _ context.Context, c Notify) ([]any, error) {
		return a.book(Booked{Account: c.Account, Kind: "notify", Ref: c.Ref})
	}),
	aggregate.Handles(func(a *Account, _ context.Context, c Refund) ([]any, error) {
		return a.book(Booked{Account: c.Account, Kind: "refund", Ref: c.Ref})
	}),
	aggregate.Handles(func(a *Account, _ context.Context, c Audit) ([]any, error) {
		return a.book(Booked{Account: c.Account, Kind: "audit", Ref: c.Ref})
	}),
	aggregate.Handles(func(a *Account, _ context.Context, c Legacy) ([]any, error) {
		return a.book(Booked{Account: c.Account, Kind: "legacy", Ref: c.Ref})
	}),
	aggregate.Applies(func(a *Account, _ Booked) { a.Booked++ }),
}

// feedStream is the name of tab id's stream of stored events.
func feedStream(id string) string { return "feed-" + id }

// msgName names a message of a tab in Tab.Seen: its source ("feed" for the
// tab's stream) and its sequence.
func msgName(source string, seq uint64) string { return fmt.Sprintf("%s/%d", source, seq) }

// tabCode is one version of the tab saga's code: its registry, its saga
// type and its bus. Each process (runner) gets its own.
type tabCode struct {
	version int
	reg     *codec.Registry
	typ     *saga.Type[Tab]
}

// registerTabs registers the types of version v of the tab code with reg.
func registerTabs(reg *codec.Registry, v int) error {
	errs := []error{
		codec.Register[Tab](reg, "tab.state", 1),
		codec.Register[TabOpened](reg, "tab.opened", 1),
		codec.Register[TabItem](reg, "tab.item", 1),
		codec.Register[TabTick](reg, "tab.tick", 1),
		codec.Register[TabPing](reg, "tab.ping", 1),
		codec.Register[TabDue](reg, "tab.due", 1),
		codec.Register[Charge](reg, "tab.charge", 1),
		codec.Register[Notify](reg, "tab.notify", 1),
		codec.Register[Refund](reg, "tab.refund", 1),
		codec.Register[Audit](reg, "tab.audit", 1),
		codec.Register[Booked](reg, "account.booked", 1),
	}
	if v < 2 {
		errs = append(errs, codec.Register[Legacy](reg, "tab.legacy", 1))
	}
	return errors.Join(errs...)
}

// newTabCode builds version v of the tab code. all registers every type
// any version knows (for the checker, which reads every record).
func newTabCode(v int, all bool) (*tabCode, error) {
	reg := codec.NewRegistry(codec.Options{})
	rv := v
	if all {
		rv = 1
	}
	if err := registerTabs(reg, rv); err != nil {
		return nil, err
	}
	typ, err := saga.New[Tab]("tab", reg, saga.Options[Tab]{})
	if err != nil {
		return nil, err
	}
	h := tabHandlers{v: v}
	errs := []error{
		saga.On(typ, saga.Event[Tab, TabOpened]{Starts: true, Handle: h.opened,
			Instance: func(e TabOpened, _ eventstore.Metadata) string { return e.Tab }}),
		saga.On(typ, saga.Event[Tab, TabItem]{Handle: h.item,
			Instance: func(e TabItem, _ eventstore.Metadata) string { return e.Tab }}),
		saga.On(typ, saga.Event[Tab, TabTick]{Handle: h.tick,
			Instance: func(e TabTick, _ eventstore.Metadata) string { return e.Tab }}),
		saga.On(typ, saga.Event[Tab, TabPing]{AnyOrder: true, Handle: h.ping,
			Instance: func(e TabPing, _ eventstore.Metadata) string { return e.Tab }}),
		saga.OnDeadline(typ, "remind", h.remind),
		saga.OnDeadline(typ, "ack", h.ack),
		saga.OnDeadline(typ, "idle", h.idle),
		saga.OnDeadline(typ, "x", h.cancelled),
		saga.OnDeadline(typ, "y", h.cancelled),
		saga.OnRejected(typ, h.rejected),
		saga.Sends[Tab, Notify](typ),
		saga.Sends[Tab, Refund](typ),
		saga.Sends[Tab, Audit](typ),
	}
	if rv < 2 {
		errs = append(errs, saga.Sends[Tab, Legacy](typ))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &tabCode{version: v, reg: reg, typ: typ}, nil
}

// bus returns a command bus of this code on store, routing every command
// to the account aggregate.
func (c *tabCode) bus(store eventstore.Store, opts command.Options) (*command.Bus, error) {
	accounts, err := aggregate.NewType[Account]("account", aggregate.Options[Account]{}, accountBindings...)
	if err != nil {
		return nil, err
	}
	bus := command.New(store, c.reg, opts)
	errs := []error{
		command.Route[Charge](bus, accounts),
		command.Route[Notify](bus, accounts),
		command.Route[Refund](bus, accounts),
		command.Route[Audit](bus, accounts),
	}
	if _, _, ok := codec.NameOf[Legacy](c.reg); ok {
		errs = append(errs, command.Route[Legacy](bus, accounts))
	}
	return bus, errors.Join(errs...)
}
