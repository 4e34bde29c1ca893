package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cairn-es/cairn/eventstore/postgres"
)

// TestAppendChecksReadWhatTheyNeed checks the plans of Append's
// statements, in every plan cache mode: for one event, the exact version's
// check is a probe of events_stream_version, a new stream's reads no index
// at all, and both leave a taken version to the index's own probe before
// the insert (ON CONFLICT ... DO NOTHING), so that a refusal writes
// nothing; many events, and the other kinds, read the last version in the
// index. None scans the table. (The conformance suite checks what each
// refuses, TestReviewS12StaleRefusalWritesNothingOnTheServer what a refusal costs.)
func TestAppendChecksReadWhatTheyNeed(t *testing.T) {
	s := newStore(t, postgres.Options{})
	seedForPlans(t, s, nil)

	one := []string{"text", "uuid", "text", "bigint", "bytea", "text", "text", "text", "text", "boolean", "bigint", "int"}
	oneArgs := []string{"'order-1'", "gen_random_uuid()", "'t'", "1", "'\\x00'", "''", "''", "''", "''", "false", "499", "3"}
	many := []string{"text", "uuid[]", "text[]", "bigint[]", "bytea[]", "text[]", "text[]", "text[]", "text[]", "boolean", "bigint", "int"}
	manyArgs := []string{"'order-1'", "ARRAY[gen_random_uuid()]", "ARRAY['t']", "ARRAY[1]::bigint[]", "ARRAY['\\x00'::bytea]",
		"ARRAY['']", "ARRAY['']", "ARRAY['']", "ARRAY['']", "false", "499", "3"}
	for check, name := range postgres.AppendChecks {
		for _, isMany := range []bool{false, true} {
			if isMany && name != "last" {
				continue // one statement for many events
			}
			types, args := one, oneArgs
			if isMany {
				types, args = many, manyArgs
			}
			sql, n := s.AppendSQL(check, isMany)
			for _, mode := range []string{"auto", "force_custom_plan", "force_generic_plan"} {
				t.Run(fmt.Sprintf("%s/many=%t/%s", name, isMany, mode), func(t *testing.T) {
					plan := explainPrepared(t, s, mode, "("+strings.Join(types[:n], ", ")+") AS "+sql, strings.Join(args[:n], ", "))
					assert.NotContains(t, plan, "Seq Scan", plan)
					if name == "new" {
						assert.NotContains(t, plan, "Index Scan", "a new stream's append scans an index:\n%s", plan)
						assert.NotContains(t, plan, "Index Only Scan", "a new stream's append scans an index:\n%s", plan)
					} else {
						assert.Contains(t, plan, "events_stream_version", "the check does not read the stream's index:\n%s", plan)
					}
					if name == "exact" {
						assert.NotContains(t, plan, "Limit", "the exact check is not one probe:\n%s", plan)
					}
					if name == "last" {
						assert.NotContains(t, plan, "Conflict", "a conflict clause on %s:\n%s", name, plan)
					} else {
						assert.Contains(t, plan, "Conflict Arbiter Indexes: events_stream_version", plan)
					}
				})
			}
		}
	}
}
