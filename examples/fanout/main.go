// Command fanout is the queue worker that writes each post into every
// follower's timeline, 15 tables, and the failures that usually leave
// timelines with a post twice, or not at all, or a queue stuck on one
// message:
//
//   - a fan-out worker is killed half-way through a post (a real SIGKILL of
//     a child process, in the middle of its transaction);
//   - the queue redelivers messages whose worker died between commit and
//     acknowledgement, and the publisher sends some twice;
//   - a staging and a production deployment consume the queue at once, and
//     then both run the fan-out at once, without a lease;
//   - one post is longer than the timeline tables accept (a poison message).
//
// Messages become commands with the message ID as the command ID, so each
// post is stored once. The fan-out is a transactional projection: a batch of
// posts, in all the timeline tables, commits with the projection's
// checkpoint in one SQLite transaction, or not at all. At the end every
// timeline holds every post exactly once, the poison post is parked as a
// dead letter with its reason, and the posts behind it went through.
//
//	go run ./examples/fanout [-posts 60] [-timelines 15] [-data dir]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/examples/internal/datadir"
)

func main() {
	if isKilledWorker() {
		os.Exit(killedWorker())
	}
	cfg := config{workers: 4}
	verbose := false
	flag.StringVar(&cfg.dataDir, "data", "", "folder for the SQLite file (default: a temporary folder, removed afterwards)")
	flag.IntVar(&cfg.posts, "posts", 60, "posts to publish")
	flag.IntVar(&cfg.timelines, "timelines", 15, fmt.Sprintf("followers, each with a timeline table (1 to %d)", maxTimelines))
	flag.BoolVar(&verbose, "v", false, "log what the consumers do (lost races, parked posts)")
	flag.Parse()
	level := slog.LevelError
	if verbose {
		level = slog.LevelInfo
	}
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if _, err := run(context.Background(), cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// config sizes a run.
type config struct {
	dataDir   string // empty: a temporary folder, removed afterwards
	posts     int
	timelines int
	workers   int
	logger    *slog.Logger
}

// authors post in turn.
var authors = []string{"rosa", "omar", "kim"}

// service is what every process of the example opens: the store, the codec
// registry and the author aggregate type.
type service struct {
	store   *sqlite.Store
	reg     *codec.Registry
	authors *aggregate.Type[Author, *Author]
}

func open(ctx context.Context, path string, logger *slog.Logger) (*service, error) {
	store, err := sqlite.Open(ctx, path, sqlite.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	reg := codec.NewRegistry(codec.Options{})
	if err := codec.Register[PostPublished](reg, "post.published", 1); err != nil {
		store.Close()
		return nil, err
	}
	types, err := aggregate.NewType[Author]("author", aggregate.Options[Author]{},
		aggregate.Handles((*Author).Publish), aggregate.Applies((*Author).Published))
	if err != nil {
		store.Close()
		return nil, err
	}
	return &service{store: store, reg: reg, authors: types}, nil
}

// deployment is one deployment of the service (staging or production): a
// command bus for the queue's messages and a fan-out consumer.
type deployment struct {
	bus    *command.Bus
	fanout *fanout
}

// busStats counts what the buses did, through their Observing middleware.
type busStats struct {
	applied, duplicates, conflicts atomic.Int64
}

func (s *busStats) observe() command.Middleware {
	return command.Observing(func(_ context.Context, o command.Observation) {
		if o.Err != nil {
			return
		}
		if o.Result.Duplicate {
			s.duplicates.Add(1)
		} else {
			s.applied.Add(1)
		}
		s.conflicts.Add(int64(o.Result.Attempts - 1))
	})
}

func run(ctx context.Context, cfg config, out io.Writer) (report, error) {
	var r report
	if cfg.timelines < 1 || cfg.timelines > maxTimelines || cfg.posts < 3 {
		return r, fmt.Errorf("from 1 to %d timelines and at least 3 posts, not %d and %d", maxTimelines, cfg.timelines, cfg.posts)
	}
	dir, removeDir, err := datadir.Open(cfg.dataDir, "cairn-fanout")
	if err != nil {
		return r, err
	}
	defer removeDir()
	path := filepath.Join(dir, "fanout.db")
	svc, err := open(ctx, path, cfg.logger)
	if err != nil {
		return r, err
	}
	defer svc.store.Close()
	stats := &busStats{}
	var deps []*deployment
	for range 2 { // staging and production
		d := &deployment{bus: command.New(svc.store, svc.reg, command.Options{
			Middleware: []command.Middleware{stats.observe()}, Logger: cfg.logger})}
		if err := command.Route[PublishPost](d.bus, svc.authors); err != nil {
			return r, err
		}
		if d.fanout, err = newFanout(ctx, svc.store, svc.reg, svc.authors, cfg.timelines, cfg.logger); err != nil {
			return r, err
		}
		deps = append(deps, d)
	}

	// The posts, under IDs of their own per run so that a data folder can
	// be reused. One is too long for the timelines.
	prefix := uuid.NewString()[:8]
	var msgs []message
	poison := cfg.posts / 3
	for i := range cfg.posts {
		p := PublishPost{Author: authors[i%len(authors)], Post: fmt.Sprintf("%s.p%03d", prefix, i+1)}
		p.Body = fmt.Sprintf("post %d by %s", i+1, p.Author)
		if i == poison {
			p.Body = strings.Repeat("a long read ", 34)
			r.poisonPost = p.Post
		}
		msgs = append(msgs, message{id: uuid.NewString(), cmd: p})
	}
	fmt.Fprintf(out, "%d posts by %d authors, each to be written into %d timeline tables (timeline_%s ... timeline_%s) in %s\n",
		cfg.posts, len(authors), cfg.timelines, followerNames[0], followerNames[cfg.timelines-1], path)

	// 1. Both deployments consume the queue at once.
	q := newQueue(msgs)
	start := time.Now()
	if err := q.drain(ctx, cfg.workers, []*command.Bus{deps[0].bus, deps[1].bus}); err != nil {
		return r, err
	}
	r.published, r.twice = q.published, q.twice
	r.deliveries, r.crashes, r.contended = int(q.deliveries.Load()), int(q.crashes.Load()), int(q.contended.Load())
	r.applied, r.duplicates, r.conflicts = int(stats.applied.Load()), int(stats.duplicates.Load()), int(stats.conflicts.Load())
	fmt.Fprintf(out, "queue, consumed by staging and production at once (message ID = command ID):\n")
	fmt.Fprintf(out, "  deliveries:           %4d  (%d published twice, %d redelivered after a worker died between commit and ack)\n",
		r.deliveries, r.twice, r.crashes)
	fmt.Fprintf(out, "  posts stored:         %4d  (once each)\n", r.applied)
	fmt.Fprintf(out, "  duplicates absorbed:  %4d  (the earlier result, nothing appended)\n", r.duplicates)
	if r.conflicts > 0 {
		fmt.Fprintf(out, "  version conflicts:    %4d  (both deployments posting for one author at once: decided again)\n", r.conflicts)
	}

	// 2. A fan-out worker process is killed half-way through a post.
	k, err := runKilledWorker(ctx, path, cfg.timelines, cfg.posts/2)
	if err != nil {
		return r, err
	}
	if err := r.afterTheKill(ctx, svc, deps[0].fanout, prefix, k); err != nil {
		return r, err
	}
	fmt.Fprintf(out, "fan-out worker (a child process) killed while writing post %s into timeline %d of %d (%s):\n",
		short(k.post), k.timeline+1, cfg.timelines, k.status)
	fmt.Fprintf(out, "  afterwards post %s was in %d timelines, and %s\n", short(k.post), r.killedPostIn, sameNote(r, cfg.timelines))

	// 3. Both deployments run the fan-out at once, without a lease, until
	// the projection reaches the newest event.
	if err := r.fanOut(ctx, svc, deps); err != nil {
		return r, err
	}
	fmt.Fprintf(out, "staging and production then ran the fan-out at once, without a lease:\n")
	fmt.Fprintf(out, "  posts checkpointed:   %4d by staging, %d by production\n", r.handled[0], r.handled[1])
	fmt.Fprintf(out, "  \"already exists\":     %4d met by staging, %d by production%s\n", r.alreadyExists[0], r.alreadyExists[1], raceNote(r.alreadyExists))
	if err := r.readBack(ctx, svc, deps[0].fanout, prefix); err != nil {
		return r, err
	}
	for _, p := range r.deadLetters {
		fmt.Fprintf(out, "  parked:               post %s, after %d attempts: %s\n", short(p.post), p.attempts, p.reason)
	}
	fmt.Fprintf(out, "  behind it:            %4d posts stored after the parked one, %d of them in every timeline\n", r.behind, r.behindEverywhere)

	// 4. What the timelines hold.
	final, err := deps[0].fanout.timelines(ctx, svc.store, prefix)
	if err != nil {
		return r, err
	}
	r.check(final, msgs)
	elapsed := time.Since(start)
	if len(r.problems) > 0 {
		return r, fmt.Errorf("the timelines are wrong:\n%s", strings.Join(r.problems, "\n"))
	}
	fmt.Fprintf(out, "exactly once: %d posts stored; each of the %d timelines holds each of the %d that fit, once; %s\n",
		r.stored, cfg.timelines, r.wantPerTimeline, elapsed.Round(time.Millisecond))
	return r, nil
}

// afterTheKill reads what the killed worker left: the events after its
// checkpoint, and the posts of this run in each timeline.
func (r *report) afterTheKill(ctx context.Context, svc *service, f *fanout, prefix string, k kill) error {
	r.killedPost, r.killStatus = k.post, k.status
	cp, err := svc.store.Checkpoint(ctx, fanoutName)
	if err != nil {
		return err
	}
	posts := eventstore.Filter{StreamPrefixes: []string{eventstore.Category(svc.authors.Name())}}
	for _, err := range svc.store.ReadAll(ctx, cp.Position, posts) {
		if err != nil {
			return err
		}
		r.leftAfterKill++
	}
	timelines, err := f.timelines(ctx, svc.store, prefix)
	if err != nil {
		return err
	}
	r.afterKill = timelines[f.followers[0]]
	r.sameAfterKill = true
	for _, in := range timelines {
		r.sameAfterKill = r.sameAfterKill && sameKeys(in, r.afterKill)
		if in[k.post] > 0 {
			r.killedPostIn++
		}
	}
	return nil
}

// fanOut runs both deployments' fan-out consumers until the projection's
// checkpoint reaches the store's newest event.
func (r *report) fanOut(ctx context.Context, svc *service, deps []*deployment) error {
	head, err := svc.store.Head(ctx)
	if err != nil {
		return err
	}
	live, stop := context.WithCancel(ctx)
	ran := make(chan error, len(deps))
	for _, d := range deps {
		go func() { ran <- d.fanout.consumer.Run(live) }()
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	waited := deps[0].fanout.consumer.WaitFor(wait, head)
	stop()
	for range deps {
		if err := <-ran; err != nil {
			return fmt.Errorf("fan-out: %w", err)
		}
	}
	if waited != nil {
		return fmt.Errorf("fan-out did not reach %s: %w", head, waited)
	}
	for i, d := range deps {
		s, err := d.fanout.consumer.Stats(ctx)
		if err != nil {
			return err
		}
		r.handled[i], r.alreadyExists[i] = int(s.Handled), int(d.fanout.alreadyExists.Load())
	}
	return nil
}

// readBack reads the fan-out's dead letters of this run, and the posts of
// this run in the store: how many are stored, and how many of those stored
// after the first dead letter every timeline holds.
func (r *report) readBack(ctx context.Context, svc *service, f *fanout, prefix string) error {
	var poison eventstore.Position
	for d, err := range f.consumer.DeadLetters(ctx) {
		if err != nil {
			return err
		}
		values, err := svc.reg.Decode(d.Event)
		if err != nil || d.Part >= len(values) {
			return fmt.Errorf("dead letter %s: part %d of %d values: %v", d.ID, d.Part, len(values), err)
		}
		p, ok := values[d.Part].Value.(PostPublished)
		if !ok || !strings.HasPrefix(p.Post, prefix) {
			continue
		}
		if len(r.deadLetters) == 0 {
			poison = d.Event.Position
		}
		r.deadLetters = append(r.deadLetters, parkedPost{post: p.Post, reason: d.Error, attempts: d.Attempts})
	}
	timelines, err := f.timelines(ctx, svc.store, prefix)
	if err != nil {
		return err
	}
	posts := eventstore.Filter{StreamPrefixes: []string{eventstore.Category(svc.authors.Name())}}
	for d, err := range svc.reg.DecodeAll(svc.store.ReadAll(ctx, eventstore.Start, posts)) {
		if err != nil {
			return err
		}
		p, ok := d.Value.(PostPublished)
		if !ok || !strings.HasPrefix(p.Post, prefix) {
			continue
		}
		r.stored++
		if len(r.deadLetters) == 0 || d.Event.Position.Compare(poison) <= 0 {
			continue
		}
		r.behind++
		everywhere := true
		for _, in := range timelines {
			everywhere = everywhere && in[p.Post] == 1
		}
		if everywhere {
			r.behindEverywhere++
		}
	}
	return nil
}

// raceNote explains the "already exists" errors that the deployment which
// lost a race for a batch met.
func raceNote(met [2]int) string {
	if met[0]+met[1] == 0 {
		return ""
	}
	return "\n                        (in a batch the other deployment had committed first: the transaction rolled back, as its\n" +
		"                        checkpoint had moved, and the consumer went on from the other's checkpoint; no loop, nothing parked)"
}

// sameNote says whether every timeline held the same posts after the kill.
func sameNote(r report, timelines int) string {
	if r.sameAfterKill {
		return fmt.Sprintf("all %d timelines held the same %d posts: the batch it was writing vanished whole", timelines, len(r.afterKill))
	}
	return "the timelines held different posts"
}

// short drops a post ID's run prefix.
func short(post string) string {
	if i := strings.IndexByte(post, '.'); i >= 0 {
		return post[i+1:]
	}
	return post
}

func sameKeys(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}
