package saga_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// The regression tests of the edges of issue 20 (edges_*_test.go), each on
// every store: the failures they cover (a store refusing a record, a record
// it cannot read, checkpoints two runners share, an append that fails)
// behave as each store behaves. Case 15 measures the runner's own memory,
// on a store of its own (TestEdge15ReschedulingADeadlineKeepsTheHeapFlat).
var edgeTests = []struct {
	name string
	run  func(t *testing.T, st edgeStores)
}{
	{"01AnyOrderMessageDoesNotDropEarlierOnes", testEdge01AnyOrderMessageDoesNotDropEarlierOnes},
	{"02DeadlineSetBehindAnotherRunnersCheckpointFires", testEdge02DeadlineSetBehindAnotherRunnersCheckpointFires},
	{"03HeldEventSurvivesAnInterruptedDrainAfterSkip", testEdge03HeldEventSurvivesAnInterruptedDrainAfterSkip},
	{"03DrainResumesAfterTheOperatorsProcessStops", testEdge03DrainResumesAfterTheOperatorsProcessStops},
	{"04RedriveKeepsARejectionOfACommandSentBeforeFrom", testEdge04RedriveKeepsARejectionOfACommandSentBeforeFrom},
	{"05RejectionOfAnEarlierCommandAfterALaterOneIsHandled", testEdge05RejectionOfAnEarlierCommandAfterALaterOneIsHandled},
	{"06ConcurrentOperatorsDoNotLoseTheNextParkedMessage", testEdge06ConcurrentOperatorsDoNotLoseTheNextParkedMessage},
	{"07RejectionOfACommandSentByTheCompletingStepIsHandled", testEdge07RejectionOfACommandSentByTheCompletingStepIsHandled},
	{"08RedriveWithAnAddedCommandAppliesEachCommandOnce", testEdge08RedriveWithAnAddedCommandAppliesEachCommandOnce},
	{"09CancelAfterScheduleInOneStepIsNotLost", testEdge09CancelAfterScheduleInOneStepIsNotLost},
	{"10InvalidUTF8SourceIsNotHandledTwice", testEdge10InvalidUTF8SourceIsNotHandledTwice},
	{"11OversizedStepRecordDoesNotStopTheSaga", testEdge11OversizedStepRecordDoesNotStopTheSaga},
	{"12ForeignOrDamagedRecordDoesNotStopTheSaga", testEdge12ForeignOrDamagedRecordDoesNotStopTheSaga},
	{"13PoisonCommandDoesNotStopTheOutbox", testEdge13PoisonCommandDoesNotStopTheOutbox},
	{"14ZeroTimeDeadlineDoesNotBlockItsSegment", testEdge14ZeroTimeDeadlineDoesNotBlockItsSegment},
	{"16ReArmingDeadlineKeepsABoundedID", testEdge16ReArmingDeadlineKeepsABoundedID},
	{"RedriveFromTheFirstStepTakesTheStartFirst", testRedriveFromTheFirstStepTakesTheStartFirst},
	{"RedriveAcrossAnEarlierRedriveTakesEachMessageOnce", testRedriveAcrossAnEarlierRedriveTakesEachMessageOnce},
	{"InterruptedRedriveGoesOnAtTheNextMessage", testInterruptedRedriveGoesOnAtTheNextMessage},
	{"RedriveThatSendsARejectedCommandAgainTakesItsRejection", testRedriveThatSendsARejectedCommandAgainTakesItsRejection},
	{"StaleViewDoesNotLoseAPoisonCommandAgain", testStaleViewDoesNotLoseAPoisonCommandAgain},
	{"RedriveByAnotherProcessSendsTheRejectedCommandAgain", testRedriveByAnotherProcessSendsTheRejectedCommandAgain},
	{"RedriveFromBeforeAPoisonCommandTakesItBack", testRedriveFromBeforeAPoisonCommandTakesItBack},
	{"DeadLettersAreHandedBackAfterARepair", testDeadLettersAreHandedBackAfterARepair},
	{"HeldMessageThatNoLongerDecodesParksItsInstance", testHeldMessageThatNoLongerDecodesParksItsInstance},
	{"ExplainShowsWhatIsStuckWhenTheStateCannotBeRead", testExplainShowsWhatIsStuckWhenTheStateCannotBeRead},
	{"AParkedMessageIsNotAGap", testAParkedMessageIsNotAGap},
	{"ParkedAndHeldAreCountedNowAndAfterARestart", testParkedAndHeldAreCountedNowAndAfterARestart},
	{"AForgottenRenameStopsTheSaga", testAForgottenRenameStopsTheSaga},
	{"RedriveTellsWhichCommandsWentOutAnew", testRedriveTellsWhichCommandsWentOutAnew},
	{"RunFiresDeadlinesOnAClockThatOnlyTellsTheTime", testRunFiresDeadlinesOnAClockThatOnlyTellsTheTime},
	{"AMissingMessageBehindAParkedOneIsAGap", testAMissingMessageBehindAParkedOneIsAGap},
	{"AnAnyOrderMessageBehindAParkedOneIsNoGap", testAnAnyOrderMessageBehindAParkedOneIsNoGap},
	{"AStepDuringTheStartUpScanIsNotUndone", testAStepDuringTheStartUpScanIsNotUndone},
	{"ARollbackAfterAddingAnEventTypeIsNotRefused", testARollbackAfterAddingAnEventTypeIsNotRefused},
	{"AForgottenRenameOfATypeWithAnOldDropIsRefused", testAForgottenRenameOfATypeWithAnOldDropIsRefused},
	{"RedriveReportsTheRetakenRejectionsCommands", testRedriveReportsTheRetakenRejectionsCommands},
	{"ALaterDeadlineIsNoPartOfTheReRun", testALaterDeadlineIsNoPartOfTheReRun},
	{"ARedriveThatSucceededReturnsNoError", testARedriveThatSucceededReturnsNoError},
	{"ExternalEventsRunTheOutboxAndTheDeadlinesOnly", testExternalEventsRunTheOutboxAndTheDeadlinesOnly},
	{"FireDueAfterARestartNeedsNoLoad", testFireDueAfterARestartNeedsNoLoad},
	{"ARejectionKeepsTheIdentityOfItsError", testARejectionKeepsTheIdentityOfItsError},
	{"FireDueAfterAFailedCatchUpLoadsTheDeadlines", testFireDueAfterAFailedCatchUpLoadsTheDeadlines},
}

func runEdges(t *testing.T, st edgeStores) {
	for _, c := range edgeTests {
		t.Run(c.name, func(t *testing.T) { c.run(t, st) })
	}
}

func TestEdgesOnMemory(t *testing.T) { runEdges(t, edgeOnMemory) }

func TestEdgesOnSQLite(t *testing.T) {
	runEdges(t, func(t testing.TB) sagatest.Stores {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return sagatest.Stores{Events: s, Consumers: s}
	})
}

func TestEdgesOnPostgres(t *testing.T) {
	server := pgtest.ForTest(t, pgtest.Options{})
	runEdges(t, func(t testing.TB) sagatest.Stores {
		s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: server.TempSchema(t, "edge")})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return sagatest.Stores{Events: s, Consumers: s}
	})
}
