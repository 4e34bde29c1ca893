package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/retry"
)

// followerNames name the followers; each has a timeline table of their own,
// timeline_<name>, in the store's SQLite file.
var followerNames = []string{"ana", "ben", "chen", "dara", "eli", "femi", "gus", "hana", "ivo", "jun",
	"kai", "lea", "mo", "nia", "oskar", "pia", "quinn", "rui", "sol", "tess"}

// maxTimelines is how many timelines the example can have.
var maxTimelines = len(followerNames)

// fanoutName is the fan-out's consumer name: its checkpoint and dead
// letters are kept under it, in the same file.
const fanoutName = "timelines"

// fanout copies every post into every follower's timeline: one table per
// follower, written by a transactional projection, so that one batch of
// posts, in all the tables, commits with the consumer's checkpoint or not at
// all. A worker killed half-way through a post leaves nothing of it behind,
// and the next worker starts with that post again, on empty tables.
type fanout struct {
	followers []string
	consumer  *projection.Consumer
	// beforeInsert, when set, runs before a post is written into
	// timeline i: the killed worker's hook.
	beforeInsert func(post string, i int)
	// alreadyExists counts the inserts refused because the timeline held
	// the post already. The tables' primary key would refuse a second copy,
	// and the naive worker's redelivery loops on exactly that error; here
	// it must stay at zero.
	alreadyExists atomic.Int64
}

// timelineSchema is a follower's timeline. The timeline team caps posts at
// 280 characters; the authors' service does not know.
func timelineSchema(follower string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS timeline_%s (
		post   TEXT PRIMARY KEY,
		author TEXT NOT NULL,
		body   TEXT NOT NULL CHECK (length(body) <= 280)
	)`, follower)
}

// newFanout creates the timeline tables of the first n followers and the
// fan-out consumer that writes them.
func newFanout(ctx context.Context, store *sqlite.Store, reg *codec.Registry, authors *aggregate.Type[Author, *Author],
	n int, logger *slog.Logger) (*fanout, error) {
	f := &fanout{followers: followerNames[:n]}
	err := store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, name := range f.followers {
			if _, err := tx.ExecContext(ctx, timelineSchema(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var view projection.TxHandlers[*sql.Tx]
	err = projection.OnTx(&view, func(ctx context.Context, tx *sql.Tx, e PostPublished, d codec.Decoded) error {
		author, _ := authors.ID(d.Event.StreamID)
		for i, name := range f.followers {
			if f.beforeInsert != nil {
				f.beforeInsert(e.Post, i)
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO timeline_"+name+" (post, author, body) VALUES (?, ?, ?)", e.Post, author, e.Body)
			if err != nil {
				if strings.Contains(err.Error(), "UNIQUE constraint failed") {
					f.alreadyExists.Add(1)
				}
				return fmt.Errorf("timeline of %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	filter, err := view.Filter(reg)
	if err != nil {
		return nil, err
	}
	f.consumer, err = projection.NewTx(fanoutName, store, reg, store, view.Handle, projection.Options{
		Filter:    filter,
		BatchSize: 10,
		// A post that keeps failing is tried three times, then parked as a
		// dead letter with its error, and the posts behind it go on.
		Retry:      retry.Policy{Attempts: 3, Initial: time.Millisecond, Max: 10 * time.Millisecond},
		Logger:     logger,
		NoStatsLog: true,
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// timelines reads, for every follower, the posts of this run (their IDs
// start with prefix) in their timeline.
func (f *fanout) timelines(ctx context.Context, store *sqlite.Store, prefix string) (map[string]map[string]int, error) {
	out := make(map[string]map[string]int)
	err := store.ReadTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, name := range f.followers {
			posts := make(map[string]int)
			rows, err := tx.QueryContext(ctx, "SELECT post FROM timeline_"+name+" WHERE post LIKE ? || '%'", prefix)
			if err != nil {
				return err
			}
			for rows.Next() {
				var post string
				if err := rows.Scan(&post); err != nil {
					rows.Close()
					return err
				}
				posts[post]++
			}
			if err := rows.Err(); err != nil {
				rows.Close()
				return err
			}
			if err := rows.Close(); err != nil {
				return err
			}
			out[name] = posts
		}
		return nil
	})
	return out, err
}
