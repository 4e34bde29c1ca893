package cli

import (
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storecopy"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/saga"
)

// pendingCap bounds how many events after a checkpoint the consumer
// commands count: a consumer far behind (or never started) on a large store
// would otherwise make a look read the whole log. Past it, the count is
// printed as "10000+". A variable so that the tests can lower it.
var pendingCap = 10000

// consumerRow is one consumer as projections ls and status and doctor
// print it; its JSON field names are stable (docs/cli.md).
type consumerRow struct {
	Name             string              `json:"name"`
	HasCheckpoint    bool                `json:"has_checkpoint"`
	Checkpoint       eventstore.Position `json:"checkpoint"`
	CheckpointSaved  time.Time           `json:"checkpoint_saved,omitzero"`
	LeaseHolder      string              `json:"lease_holder,omitempty"`
	LeaseExpires     time.Time           `json:"lease_expires,omitzero"`
	LeaseLive        bool                `json:"lease_live"`
	DeadLetters      int                 `json:"dead_letters"`
	OldestDeadLetter time.Time           `json:"oldest_dead_letter,omitzero"`
	// Pending counts the events after the checkpoint that the consumer
	// reads, when its filter is known here (PendingExact): a mounted
	// projection's, a saga's. Otherwise the store does not know the
	// consumer's filter, and Pending counts the events after the
	// checkpoint of any type: an upper bound of what the consumer has
	// left, as a filtered consumer's checkpoint stays at the last event
	// it read. PendingCapped says the count stopped at the cap
	// (pendingCap) and there are more.
	Pending       int  `json:"pending"`
	PendingExact  bool `json:"pending_exact"`
	PendingCapped bool `json:"pending_capped"`
	// TimeLagSeconds is how much older the first pending event is than
	// the newest event: 0 when nothing is pending; an upper bound too
	// when Pending is.
	TimeLagSeconds float64 `json:"time_lag_seconds"`
	// FirstPending is when the first pending event was recorded: since
	// when the consumer has been behind.
	FirstPending time.Time `json:"first_pending,omitzero"`
	// Mounted says the consumer is one of the service's projections
	// (only in a service's binary).
	Mounted bool `json:"mounted,omitempty"`
	// Stats are the mounted projection's own figures.
	Stats *statsRow `json:"stats,omitempty"`
}

// leaseCell is the lease for a table: its holder and expiry, "lapsed" when
// it expired or was released, "-" when the consumer was never leased.
func (r consumerRow) leaseCell() (holder, expires string) {
	switch {
	case r.LeaseHolder == "":
		return "-", "-"
	case !r.LeaseLive:
		return r.LeaseHolder, "lapsed"
	}
	return r.LeaseHolder, when(r.LeaseExpires)
}

// pendingCell is the pending count for a table: "+" after a count that
// stopped at the cap, "?" after an upper bound (the consumer's filter is
// unknown here, so every event after its checkpoint was counted).
func (r consumerRow) pendingCell() string {
	return strconv.Itoa(r.Pending) + map[bool]string{true: "+"}[r.PendingCapped] + r.boundMark()
}

// lagCell is the time lag for a table, marked as pendingCell marks it.
func (r consumerRow) lagCell() string {
	if r.Pending == 0 {
		return "-"
	}
	return lagString(r.TimeLagSeconds) + r.boundMark()
}

// boundMark is "?" when the pending figures are an upper bound.
func (r consumerRow) boundMark() string {
	if r.PendingExact {
		return ""
	}
	return "?"
}

func lagString(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	if d >= time.Second {
		d = d.Round(time.Second)
	}
	return d.String()
}

func (r consumerRow) checkpointCell() string {
	if !r.HasCheckpoint {
		return "none"
	}
	return position(r.Checkpoint)
}

// catalogOf returns store's Catalog, which every Cairn store is.
func catalogOf(store eventstore.Store) (storekit.Catalog, error) {
	cat, ok := store.(storekit.Catalog)
	if !ok {
		return nil, fmt.Errorf("this store (%T) cannot list what it holds (it is no storekit.Catalog)", store)
	}
	return cat, nil
}

// listConsumers returns every consumer the store keeps something for, in
// name order.
func listConsumers(ctx context.Context, store eventstore.Store) ([]storekit.ConsumerInfo, error) {
	cat, err := catalogOf(store)
	if err != nil {
		return nil, err
	}
	var all []storekit.ConsumerInfo
	for c, err := range cat.Consumers(ctx) {
		if err != nil {
			return nil, fmt.Errorf("listing consumers: %w", err)
		}
		// A copy's progress mark is a checkpoint too, but of a position
		// in the store it copied from, and no process reads this one's
		// log with it: it is no consumer to list, nor to find lagging.
		if strings.HasPrefix(c.Name, storecopy.CheckpointPrefix) {
			continue
		}
		all = append(all, c)
	}
	return all, nil
}

// findConsumer returns the consumer named name, or an error saying there
// is none (exit code 1).
func (a *app) findConsumer(ctx context.Context, store eventstore.Store, name string) (storekit.ConsumerInfo, error) {
	all, err := listConsumers(ctx, store)
	if err != nil {
		return storekit.ConsumerInfo{}, err
	}
	for _, c := range all {
		if c.Name == name {
			return c, nil
		}
	}
	return storekit.ConsumerInfo{}, fmt.Errorf("no consumer named %q (it has no checkpoint, lease or dead letter in this store); %s projections ls lists them", name, a.name)
}

// liveLease reports whether c's lease is held now, by the clock of this
// machine (the store's own clock decides who may take it; they should agree
// to well within a lease's TTL).
func liveLease(c storekit.ConsumerInfo, now time.Time) bool {
	return c.HasLease && c.Lease.Expires.After(now)
}

// logHead is the newest event of the log, which lags are measured to.
type logHead struct {
	event eventstore.Event
	ok    bool // the log holds an event
}

// readHead reads the log's newest event: the event just after a position
// a hair before the head (positions are pairs, so that is the one before
// in the pair's order, which no other event can hold).
func readHead(ctx context.Context, store eventstore.Store) (logHead, error) {
	head, err := headOf(ctx, store)
	if err != nil || head.IsZero() {
		return logHead{}, err
	}
	before := eventstore.Position{Major: head.Major, Minor: head.Minor - 1}
	if head.Minor == 0 {
		before = eventstore.Position{Major: head.Major - 1, Minor: math.MaxUint64}
	}
	for e, err := range store.ReadAll(ctx, before, eventstore.Filter{}) {
		if err != nil {
			return logHead{}, err
		}
		return logHead{event: e, ok: true}, nil
	}
	return logHead{}, nil
}

// consumerRowOf measures c against the log: the events after its
// checkpoint (up to pendingCap) that filter selects, every one when filter
// is nil (unknown), and how far behind the newest the first of them is.
func consumerRowOf(ctx context.Context, store eventstore.Store, c storekit.ConsumerInfo, head logHead, now time.Time, filter *eventstore.Filter) (consumerRow, error) {
	r := consumerRow{
		Name: c.Name, HasCheckpoint: c.HasCheckpoint, Checkpoint: c.Checkpoint.Position,
		CheckpointSaved: c.CheckpointSaved, DeadLetters: c.DeadLetters, OldestDeadLetter: c.OldestDeadLetter,
	}
	if c.HasLease {
		r.LeaseHolder, r.LeaseExpires, r.LeaseLive = c.Lease.Holder, c.Lease.Expires, liveLease(c, now)
	}
	// Nothing after the checkpoint at all is nothing pending, whatever
	// the filter.
	r.PendingExact = filter != nil
	if !head.ok || !c.Checkpoint.Position.Before(head.event.Position) {
		r.PendingExact = true
		return r, nil
	}
	f := eventstore.Filter{}
	if filter != nil {
		f = *filter
	}
	for e, err := range store.ReadAll(ctx, c.Checkpoint.Position, f) {
		if err != nil {
			return r, fmt.Errorf("consumer %q: reading the events after its checkpoint: %w", c.Name, err)
		}
		if r.Pending == 0 {
			r.FirstPending = e.RecordedAt
		}
		if r.Pending == pendingCap {
			r.PendingCapped = true
			break
		}
		r.Pending++
	}
	if r.Pending > 0 {
		r.TimeLagSeconds = max(0, head.event.RecordedAt.Sub(r.FirstPending).Seconds())
	} else {
		r.PendingExact = true
	}
	return r, nil
}

// consumerFilters returns the filters known here of the consumers named:
// the service's projections' and saga runners' (in a service's binary),
// and those the store tells of saga consumers (saga.StoredConsumerFilters:
// a saga's outbox; its events consumer, from its subscription record).
// The filter of a consumer not in the map is unknown. all are every
// consumer the store lists, which tells a segmented saga's names apart;
// the names a saga type's runners left behind when its segment count
// changed (see leftBehind) are given no filter, so that their frozen
// checkpoints count as no lag.
func consumerFilters(ctx context.Context, store eventstore.Store, svc *Service, all []storekit.ConsumerInfo) (map[string]eventstore.Filter, error) {
	old := leftBehind(all)
	names := make([]string, 0, len(all))
	for _, c := range all {
		if !old[c.Name] {
			names = append(names, c.Name)
		}
	}
	known, err := saga.StoredConsumerFilters(ctx, store, names)
	if err != nil {
		return nil, fmt.Errorf("reading the sagas' subscription records: %w", err)
	}
	if svc == nil {
		return known, nil
	}
	for i, r := range svc.Sagas {
		if r == nil {
			return nil, fmt.Errorf("the service's saga runner %d is nil: fix Service.Sagas in the service's set-up", i)
		}
		maps.Copy(known, r.consumerFilters())
	}
	m, err := mounted(svc)
	if err != nil {
		return nil, err
	}
	for name, p := range m {
		known[name] = p.consumer().Filter()
	}
	return known, nil
}

// filterOf returns name's filter from known, nil when it is unknown.
func filterOf(known map[string]eventstore.Filter, name string) *eventstore.Filter {
	f, ok := known[name]
	if !ok {
		return nil
	}
	return &f
}

// consumerRows measures every consumer of the store against head, with
// the filters known here (see consumerFilters), and marks the service's
// projections (markMounted).
func consumerRows(ctx context.Context, store eventstore.Store, svc *Service, head logHead) ([]consumerRow, error) {
	all, err := listConsumers(ctx, store)
	if err != nil {
		return nil, err
	}
	known, err := consumerFilters(ctx, store, svc, all)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rows := make([]consumerRow, 0, len(all))
	for _, c := range all {
		r, err := consumerRowOf(ctx, store, c, head, now, filterOf(known, c.Name))
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return markMounted(ctx, store, svc, rows)
}

// lookAt opens the store to look at consumers: read-only in the bare
// binary; in a service's binary the service is built too (on a store
// opened read-write, as the service needs), so that its projections are
// marked and their own figures shown.
func (a *app) lookAt(ctx context.Context) (eventstore.Store, *Service, error) {
	if a.opts.Service == nil {
		store, err := a.openStore(ctx, ReadOnly)
		return store, nil, err
	}
	svc, store, err := a.serviceOn(ctx, "")
	return store, svc, err
}

// statsRow is a mounted projection's own figures ([projection.Stats]).
type statsRow struct {
	Head           eventstore.Position `json:"head"`
	Pending        int                 `json:"pending"`
	TimeLagSeconds float64             `json:"time_lag_seconds"`
	Handled        uint64              `json:"handled"`
	Rate           float64             `json:"rate"`
	Parked         int                 `json:"parked"`
	Leader         bool                `json:"leader"`
}

// markMounted marks the rows of the service's projections and adds their
// figures, and rows for those the store keeps nothing for yet (never run).
func markMounted(ctx context.Context, store eventstore.Store, svc *Service, rows []consumerRow) ([]consumerRow, error) {
	m, err := mounted(svc)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, r := range rows {
		listed[r.Name] = true
	}
	var absent []storekit.ConsumerInfo
	for name := range m {
		if !listed[name] {
			absent = append(absent, storekit.ConsumerInfo{Name: name})
		}
	}
	if len(absent) > 0 {
		head, err := readHead(ctx, store)
		if err != nil {
			return nil, fmt.Errorf("reading the newest event: %w", err)
		}
		for _, c := range absent {
			f := m[c.Name].consumer().Filter()
			r, err := consumerRowOf(ctx, store, c, head, time.Now(), &f)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r)
		}
		slices.SortFunc(rows, func(a, b consumerRow) int { return strings.Compare(a.Name, b.Name) })
	}
	for i := range rows {
		p, ok := m[rows[i].Name]
		if !ok {
			continue
		}
		rows[i].Mounted = true
		s, err := p.consumer().Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("projection %q: reading its figures: %w", rows[i].Name, err)
		}
		rows[i].Stats = &statsRow{Head: s.Head, Pending: s.Pending, TimeLagSeconds: s.TimeLag.Seconds(),
			Handled: s.Handled, Rate: s.Rate, Parked: s.Parked, Leader: s.Leader}
	}
	return rows, nil
}

// sagaSegments matches a saga runner's consumer names: "saga:<type>",
// "saga:<type>#k/n", each with ":outbox" or not. A type's name has no
// "-" or ":".
var sagaSegments = regexp.MustCompile(`^saga:([^-:#]+)(?:#\d+/(\d+))?(?::outbox)?$`)

// leftBehind finds the consumer names that a saga type's runners no
// longer use: when a type's segment count changes (RunnerOptions.Segments),
// the runners take the names of the new count ("saga:<type>#k/n", or
// "saga:<type>" for one segment) and the old names keep checkpoints that
// nothing moves. Of the counts whose names a type has, the one in use is
// taken to be that of the latest activity (a checkpoint saved, a lease
// held); the others' names are left behind. Their dead letters are still
// reported; their checkpoints are no lag.
func leftBehind(all []storekit.ConsumerInfo) map[string]bool {
	type group struct {
		segments int
		names    []string
		latest   time.Time
	}
	byType := map[string]map[int]*group{} // type -> segment count -> names
	for _, c := range all {
		m := sagaSegments.FindStringSubmatch(c.Name)
		if m == nil {
			continue
		}
		typ, segments := m[1], 1
		if m[2] != "" {
			segments, _ = strconv.Atoi(m[2]) // digits, by the pattern
		}
		if byType[typ] == nil {
			byType[typ] = map[int]*group{}
		}
		g := byType[typ][segments]
		if g == nil {
			g = &group{segments: segments}
			byType[typ][segments] = g
		}
		g.names = append(g.names, c.Name)
		for _, t := range []time.Time{c.CheckpointSaved, c.Lease.Expires} {
			if t.After(g.latest) {
				g.latest = t
			}
		}
	}
	old := map[string]bool{}
	for _, groups := range byType {
		if len(groups) < 2 {
			continue
		}
		// The latest activity wins; on a tie (a store that keeps no save
		// times, nothing leased) the larger count, as a segmented runner
		// keeps dead letters under "saga:<type>" too: the same answer
		// every time, whatever the map's order.
		var current *group
		for _, g := range groups {
			if current == nil || g.latest.After(current.latest) ||
				(g.latest.Equal(current.latest) && g.segments > current.segments) {
				current = g
			}
		}
		for _, g := range groups {
			if g != current {
				for _, n := range g.names {
					old[n] = true
				}
			}
		}
	}
	return old
}
