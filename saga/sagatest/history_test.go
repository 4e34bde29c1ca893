package sagatest_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/sagareplay"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// A sign-up saga whose model changes: old code welcomes a user and
// completes once the address is verified; new code also grants a trial,
// to new users only.
type (
	Registered struct{ User string }
	Verified   struct{ User string }

	SendWelcome struct{ User string }
	GrantTrial  struct{ User string }

	// Signup is the saga's state. Trials is what the new code's starting
	// handler sets: old instances do not have it.
	Signup struct {
		User   string `json:"user"`
		Trials bool   `json:"trials,omitempty"`
	}
)

func (c SendWelcome) AggregateID() string { return c.User }
func (c GrantTrial) AggregateID() string  { return c.User }

// signupChange is how a version of the sign-up saga differs from the old
// code.
type signupChange int

const (
	oldSignup          signupChange = iota
	trialGatedOnState               // Verified grants a trial when the start set Trials
	trialOnEveryVerify              // Verified always grants a trial
	trialAtStartGated               // the start grants a trial from the release on
	trialAtEveryStart               // the start always grants a trial
)

// trialsRelease is when the release that grants trials went out.
var trialsRelease = sagatest.Start.Add(30 * 24 * time.Hour)

func signupSaga(t *testing.T, change signupChange) *saga.Type[Signup] {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, errors.Join(
		codec.Register[Signup](reg, "signup.state", 1),
		codec.Register[Registered](reg, "user.registered", 1),
		codec.Register[Verified](reg, "user.verified", 1),
		codec.Register[SendWelcome](reg, "send-welcome", 1),
		codec.Register[GrantTrial](reg, "grant-trial", 1),
	))
	sg, err := saga.New[Signup]("signup", reg, saga.Options[Signup]{})
	require.NoError(t, err)
	require.NoError(t, errors.Join(
		saga.Sends[Signup, SendWelcome](sg),
		saga.Sends[Signup, GrantTrial](sg),
		saga.On(sg, saga.Event[Signup, Registered]{
			Instance: func(e Registered, _ eventstore.Metadata) string { return e.User },
			Starts:   true,
			Handle: func(_ context.Context, s *Signup, e Registered, out *saga.Output) error {
				s.User = e.User
				s.Trials = change == trialGatedOnState
				out.Send(SendWelcome(e))
				if change == trialAtEveryStart || (change == trialAtStartGated && !out.Now().Before(trialsRelease)) {
					out.Send(GrantTrial(e))
				}
				return nil
			},
		}),
		saga.On(sg, saga.Event[Signup, Verified]{
			Instance: func(e Verified, _ eventstore.Metadata) string { return e.User },
			Handle: func(_ context.Context, s *Signup, e Verified, out *saga.Output) error {
				if change == trialOnEveryVerify || s.Trials {
					out.Send(GrantTrial(e))
				}
				out.Complete()
				return nil
			},
		}),
	))
	return sg
}

// recordedSignups runs the old code on two users and returns their
// histories as files.
func recordedSignups(t *testing.T) []string {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	old, err := saga.NewRunner(signupSaga(t, oldSignup), store, nil, saga.RunnerOptions{Clock: sagatest.NewClock(sagatest.Start)})
	require.NoError(t, err)
	var files []string
	for _, user := range []string{"ann", "bob"} {
		for seq, ev := range []any{Registered{User: user}, Verified{User: user}} {
			_, err := old.Deliver(ctx, saga.Delivery{Source: "accounts-" + user, Sequence: uint64(seq), Event: ev})
			require.NoError(t, err)
		}
		var file bytes.Buffer
		require.NoError(t, sagatest.WriteHistory(&file, old.Export(ctx, user)))
		files = append(files, file.String())
	}
	return files
}

// TestAStepForNewInstancesOnlyLeavesOldHistoriesAlone: issue 23, item 13.
// The ways CheckHistory's documentation gives to add a step for new
// instances only pass the old histories, and new instances take the step;
// the naive ways fail every history at the step they change, naming each
// instance.
func TestAStepForNewInstancesOnlyLeavesOldHistoriesAlone(t *testing.T) {
	files := recordedSignups(t)
	check := func(change signupChange) []string {
		rec := &recorder{TB: t}
		var histories []func(func(eventstore.Event, error) bool)
		for _, f := range files {
			histories = append(histories, sagatest.ReadHistory(strings.NewReader(f)))
		}
		sagatest.CheckHistory(rec, signupSaga(t, change), histories[0], histories[1])
		return rec.errs
	}

	assert.Empty(t, check(trialGatedOnState), "a later step gated on a field the start now sets")
	assert.Empty(t, check(trialAtStartGated), "a change of the start gated on the step's time")

	for change, step := range map[signupChange]string{trialOnEveryVerify: "step 1 (event user.verified", trialAtEveryStart: "step 0 (event user.registered"} {
		errs := check(change)
		require.Len(t, errs, 2, "every history diverges")
		for i, user := range []string{"ann", "bob"} {
			assert.Contains(t, errs[i], `sagatest: saga "signup": instance "`+user+`" (stream "saga:signup-`+user+`"), `+step)
			assert.Contains(t, errs[i], "GrantTrial")
		}
	}

	// New instances, after the release, take the new step.
	sagatest.New(t, signupSaga(t, trialGatedOnState)).
		Given(Registered{User: "cy"}).
		When(Verified{User: "cy"}).
		ThenCommands(GrantTrial{User: "cy"}).
		ThenCompleted()
	s := sagatest.New(t, signupSaga(t, trialAtStartGated))
	s.Clock().Advance(trialsRelease.Sub(s.Clock().Now()))
	s.When(Registered{User: "di"}).ThenCommands(SendWelcome{User: "di"}, GrantTrial{User: "di"})
}

// TestReplayRefusesAHistoryOfAnotherSaga: a history whose step records are
// not in the saga's streams (another saga's export) is an invalid argument
// naming the stream, not divergences of a made-up instance.
func TestReplayRefusesAHistoryOfAnotherSaga(t *testing.T) {
	files := recordedSignups(t)
	_, err := sagareplay.Replay(context.Background(), saleSaga(registry(), time.Minute), sagatest.ReadHistory(strings.NewReader(files[0])))
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `saga:signup-ann`)
	assert.Contains(t, err.Error(), `saga "sale"`)

	rec := &recorder{TB: t}
	broken := files[0] + "{not json\n"
	sagatest.CheckHistory(rec, signupSaga(t, oldSignup), sagatest.ReadHistory(strings.NewReader(broken)))
	require.Len(t, rec.errs, 1)
	assert.Contains(t, rec.errs[0], `instance "ann" (stream "saga:signup-ann"): the history after step 1`, "an unreadable line names the instance it breaks")

	rec = &recorder{TB: t}
	sagatest.CheckHistory(rec, signupSaga(t, oldSignup), sagatest.ReadHistory(strings.NewReader("{not json\n")))
	require.Len(t, rec.errs, 1)
	assert.Contains(t, rec.errs[0], `saga "signup": the history before its first step`, "before any step, the saga is named")
}
