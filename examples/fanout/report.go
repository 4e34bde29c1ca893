package main

import (
	"fmt"
)

// report is what a run measured, for the summary and the test.
type report struct {
	// The queue.
	published, twice, deliveries, crashes, contended int
	applied, duplicates, conflicts                   int

	// The killed worker: the post it was writing, how many timelines held
	// it afterwards, and whether every timeline held the same posts.
	killedPost, killStatus string
	killedPostIn           int
	leftAfterKill          int // events after the checkpoint the killed worker left
	afterKill              map[string]int
	sameAfterKill          bool

	// The two deployments' fan-out: posts checkpointed by each, and the
	// inserts each found already done (in a batch the other had committed).
	handled, alreadyExists [2]int

	// The poison post, and the posts stored after it.
	poisonPost               string
	deadLetters              []parkedPost
	stored                   int // posts of this run in the store
	behind, behindEverywhere int

	// The end.
	wantPerTimeline int
	perTimeline     map[string]int // follower -> posts of this run in their timeline
	problems        []string
}

// parkedPost is a dead letter of the fan-out.
type parkedPost struct {
	post, reason string
	attempts     int
}

// check compares the timelines with the posts published: each timeline must
// hold every post but the poison one, once.
func (r *report) check(timelines map[string]map[string]int, msgs []message) {
	r.perTimeline = make(map[string]int)
	r.wantPerTimeline = len(msgs) - 1
	if r.stored != len(msgs) {
		r.problems = append(r.problems, fmt.Sprintf("%d posts stored, %d published", r.stored, len(msgs)))
	}
	if r.killedPostIn != 0 || !r.sameAfterKill {
		r.problems = append(r.problems, fmt.Sprintf("after the kill, the post being written was in %d timelines (same posts everywhere: %v)", r.killedPostIn, r.sameAfterKill))
	}
	if len(r.deadLetters) != 1 || r.deadLetters[0].post != r.poisonPost {
		r.problems = append(r.problems, fmt.Sprintf("parked %v, expected the poison post %s alone", r.deadLetters, r.poisonPost))
	}
	if r.behindEverywhere != r.behind {
		r.problems = append(r.problems, fmt.Sprintf("%d of the %d posts behind the parked one reached every timeline", r.behindEverywhere, r.behind))
	}
	for follower, posts := range timelines {
		r.perTimeline[follower] = len(posts)
		for _, m := range msgs {
			want := 1
			if m.cmd.Post == r.poisonPost {
				want = 0
			}
			if n := posts[m.cmd.Post]; n != want {
				r.problems = append(r.problems, fmt.Sprintf("timeline of %s holds post %s %d times", follower, m.cmd.Post, n))
			}
		}
		if len(posts) != r.wantPerTimeline {
			r.problems = append(r.problems, fmt.Sprintf("timeline of %s holds %d posts of this run, expected %d", follower, len(posts), r.wantPerTimeline))
		}
	}
}
