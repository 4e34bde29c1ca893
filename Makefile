# Cairn's build, test, benchmark and lint entry points. CI runs `make test`
# through .ci/run on a fresh machine.

GO            ?= go
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Benchmarks run several times so that docs/benchmarks.md can record medians.
BENCH_COUNT   ?= 6
BENCH         ?= .
BENCH_PKGS    ?= ./...
TEST_TIMEOUT  ?= 14m

.PHONY: all build test test-main test-race test-outside-race test-kurrentdb test-cmd test-sims bench ceilings lint demo demo-v2 fuzz sim torture soak clean

all: build lint test

# The KurrentDB store is a Go module of its own (eventstore/kurrentdb), so
# that gRPC never enters the module graph of a program on another store;
# `./...` stops at a module's border, so each target names it. It builds
# against this checkout through a replace directive in its go.mod, not a
# go.work, so that every go command in it works the same on a clean clone
# and in CI, with no workspace file to keep in step.
KURRENTDB     := eventstore/kurrentdb
# The cairn binary is a module of its own too, since it takes the KurrentDB
# store, and builds the same way, against both (two replace directives).
CAIRN_CMD     := cmd/cairn
# The lists of tests that run without the race detector (race.Outside), in
# the main module (the other two modules are tested apart).
OUTSIDE_RACE  := $(shell find * -path $(KURRENTDB) -prune -o -path $(CAIRN_CMD) -prune -o -path '*/testdata/outside-race.txt' -print)

build:
	$(GO) build ./...
	cd $(KURRENTDB) && $(GO) build ./...
	cd $(CAIRN_CMD) && $(GO) build ./...

# The PostgreSQL tests start a throwaway server of their own (internal/testrig/pgtest)
# unless CAIRN_POSTGRES_URL names one; the KurrentDB store runs against its own
# protocol-level test server, and a real server as well when CAIRN_KURRENTDB_URL names one.
# go vet's whole set runs in `make lint` (CI runs both); `go test` runs its
# high-confidence checks on every package it tests.
#
# Two lanes on the two cores: the main module's tests under the race
# detector, which leave a core idle for long stretches (a PostgreSQL
# server's fsyncs, SQLite's), beside the KurrentDB module's and the cairn
# binary's, then the main module's checks outside the race detector and
# the saga simulations, each in whichever lane is free first: the race run
# is the longest by far, so the rest all goes in the other lane. Each go
# test's output is printed whole when it ends (--output-sync=line).
test:
	@$(MAKE) --no-print-directory -j2 --output-sync=line test-race test-kurrentdb test-outside-race test-sims

# test-main is the main module's part of `make test`, in one lane.
test-main: test-race test-outside-race

test-race:
	$(GO) test -race -timeout $(TEST_TIMEOUT) ./...

test-outside-race:
	@# The projection crash tests at the issue's full size (50k events, 30
	@# SIGKILLs): under the race detector above they run 5k events and 10
	@# SIGKILLs, as SQLite is ~40x slower there.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'TestConformance/Projections/Crash' ./eventstore/sqlite/ ./eventstore/postgres/
	@# SQLite's appender crash test at its full 50 SIGKILLs (10 under the
	@# race detector above).
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestCrashSafety$$' ./eventstore/sqlite/
	@# The no-skip proof's five rounds of 20 s (one under the race detector).
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestNoSkipUnderConcurrentTransactions$$' ./eventstore/postgres/
	@# Exhaustive single-goroutine checks, which skip under the race detector
	@# above: in each package, the tests its testdata/outside-race.txt names,
	@# the only ones race.Outside lets skip (internal/testrig/race).
	@set -e; for list in $(OUTSIDE_RACE); do \
		pkg=./$${list%/testdata/outside-race.txt}/; \
		echo "$(GO) test -count=1 -run <$$list> $$pkg"; \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run "^($$(paste -sd'|' $$list))\$$" $$pkg; \
	done
	@# The failpoints and the crash matrix's small slice (every failpoint on
	@# SQLite x seeds 1-2, three on PostgreSQL x seed 1) need a test binary
	@# built with the failpoints tag; its children run without -race.
	$(GO) test -tags cairnfailpoints -count=1 -timeout $(TEST_TIMEOUT) ./internal/failpoint/ ./internal/testrig/crashmatrix/
	@# Allocation comparisons, which the race detector above skips: it
	@# drops sync.Pool's items at random, so equal runs differ.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'CostsNothingMore' ./saga/ ./projection/
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'AllocationBudgets|AllocatesNothing|CostsNothingMore' ./command/ ./eventstore/storekit/

test-sims:
	@# The saga simulation's 500 seeds at the issue's size, 100 orders each:
	@# under the race detector in test-race, 50 seeds place 25 each.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestSimulation$$' ./internal/testrig/sim/
	@# The widened saga simulation (the tab workload, issue 20): a slice of
	@# 300 seeds of 30 tabs; `make sim WORKLOAD=tabs` runs the campaign.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestSimulation$$' ./internal/testrig/sim/ -args -sim.workload=tabs -sim.seeds=300

test-kurrentdb:
	@# The KurrentDB store, against its protocol-level test server (and a
	@# real server too when CAIRN_KURRENTDB_URL names one).
	cd $(KURRENTDB) && $(GO) test -race -timeout $(TEST_TIMEOUT) ./...
	@[ -n "$$CAIRN_KURRENTDB_URL" ] || echo "kurrentdb: CAIRN_KURRENTDB_URL is not set, so its suites ran against the protocol-level test server only (docs/kurrentdb.md: running them against a real KurrentDB)"
	@# The cairn binary after the KurrentDB store, in this lane.
	@$(MAKE) --no-print-directory test-cmd

test-cmd:
	@# The cairn binary, built and run as a child process, on SQLite and
	@# on the KurrentDB test server run as a process of its own.
	cd $(CAIRN_CMD) && $(GO) test -race -timeout $(TEST_TIMEOUT) ./...

# Full-size checks that take too long for every test run; each suite reads
# CAIRN_TORTURE=1 and runs at its issue's full size. Figures: docs/reliability.md.
TORTURE_TIMEOUT ?= 90m
torture:
	@# Linearizability of appends (issue 14): 5 histories of 64 clients x
	@# 20,000 operations per store, checked with porcupine; one package at
	@# a time, so that the checker has the cores to itself.
	CAIRN_TORTURE=1 $(GO) test -count=1 -p 1 -v -timeout $(TORTURE_TIMEOUT) -run 'TestLinearizable$$' ./eventstore/memory/ ./eventstore/sqlite/ ./eventstore/postgres/
	@# Crash matrix (issue 14): 9 failpoints x SQLite and PostgreSQL x seeds
	@# 1-100, a child SIGKILLed at each cell's failpoint, a clean child
	@# draining; the table of figures is the last thing printed.
	CAIRN_TORTURE=1 $(GO) test -tags cairnfailpoints -count=1 -v -timeout $(TORTURE_TIMEOUT) -run 'TestCrashMatrix$$' ./internal/testrig/crashmatrix/
	@# A saga's memory (issue 20): 10,000 instances rescheduling an
	@# inactivity timeout 100 times each, the live heap flat.
	CAIRN_TORTURE=1 $(GO) test -count=1 -v -timeout $(TORTURE_TIMEOUT) -run 'TestTenThousandInstances' ./saga/

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCH_COUNT) -timeout 60m $(BENCH_PKGS)
	cd $(KURRENTDB) && $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCH_COUNT) -timeout 60m ./...
	cd $(CAIRN_CMD) && $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCH_COUNT) -timeout 60m ./...

# The engine ceilings of the peers benchmark's workloads (docs/benchmarks.md,
# "Engine ceilings"), in CEILING_ROUNDS rounds. PostgreSQL's three variants
# take turns an operation at a time in one process and server
# (BenchmarkCeilingInterleaved): run one after the other, each met a server
# and a disk in another state, and the ratios moved with the machine as much
# as with the code. SQLite's rounds alternate raw and the store in one
# process.
CEILING_ROUNDS ?= 12
ceilings:
	@set -e; bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; \
	$(GO) test -c -o "$$bin/pg.test" ./eventstore/postgres/; \
	$(GO) test -c -o "$$bin/sqlite.test" ./eventstore/sqlite/; \
	for i in $$(seq $(CEILING_ROUNDS)); do \
		(cd eventstore/postgres && "$$bin/pg.test" -test.run '^$$' -test.bench 'CeilingInterleaved' -test.benchtime 3000x) | grep '^Benchmark'; \
	done; \
	for i in $$(seq $(CEILING_ROUNDS)); do \
		(cd eventstore/sqlite && "$$bin/sqlite.test" -test.run '^$$' -test.bench 'Ceiling/save|StreamRead100' -test.benchtime 2000x) | grep '^Benchmark'; \
	done

lint:
	@.ci/no-build-outputs
	@# No arrow from the library to a test rig, a tool or an example.
	@.ci/layering
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd $(KURRENTDB) && $(GO) vet ./...
	cd $(CAIRN_CMD) && $(GO) vet ./...
	$(GO) vet -tags cairnfailpoints ./internal/failpoint/ ./internal/testrig/crashmatrix/
	$(GO) run $(STATICCHECK) ./...
	cd $(KURRENTDB) && $(GO) run $(STATICCHECK) ./...
	cd $(CAIRN_CMD) && $(GO) run $(STATICCHECK) ./...
	@# Programs on SQLite, PostgreSQL or memory get no gRPC.
	@if $(GO) mod graph | grep -q 'google.golang.org/grpc@'; then \
		echo "the main module's graph has gRPC in it: only $(KURRENTDB) may"; exit 1; fi
	@# govulncheck cannot reach its database here: known advisories are
	@# pinned as minimum versions instead (internal/tools/depaudit/minimums.txt).
	$(GO) run ./internal/tools/depaudit internal/tools/depaudit/minimums.txt . $(KURRENTDB) $(CAIRN_CMD)

# The soak (issue 14): the reservation flow on SQLite at a steady rate for
# SOAK, its saga runner SIGKILLed at random; memory, goroutines and lag must
# stay flat and every order end exactly once. Not under the race detector,
# which would measure its own memory. `make test` runs its 10-second smoke
# size (TestSoakSmoke). docs/reliability.md records the runs.
SOAK ?= 20m
soak:
	CAIRN_SOAK=$(SOAK) $(GO) test -count=1 -v -run '^TestSoak$$' -timeout 40m ./internal/testrig/soak/

# Each fuzz target, package:name, for FUZZTIME (the seed corpora already run
# in `make test`): the codec's, and the name checks' word-wise fast paths.
FUZZTIME ?= 60s
FUZZ_TARGETS = codec:FuzzDecode codec:FuzzRoundTrip codec:FuzzTransform codec:FuzzRename codec:FuzzSplit codec:FuzzDrop \
	codec:FuzzJSONDecodesLikeEncodingJSON codec:FuzzPureDecoders codec:FuzzPlainDecodesOnlyAsEncodingJSONDoes codec:FuzzPlainWritesWhatEncodingJSONWrites \
	internal/plainjson:FuzzStringsAsEncodingJSON eventstore/storekit:FuzzDecodeExtraJSON internal/names:FuzzPrintable internal/names:FuzzStorableText
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		p=$${t%%:*}; f=$${t#*:}; \
		echo "fuzz $$p $$f for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./$$p/ || exit 1; \
	done

# The deterministic saga simulation (internal/testrig/sim): SIM_SEEDS seeds from
# SIM_FROM with a summary, or with SEED=n that one seed, replayed exactly,
# with its trace. ORDERS sets the orders (tabs) per seed (100 orders, 30
# tabs by default; a seed that failed under the race detector names the
# ORDERS it ran with). WORKLOAD=tabs runs the tab workload (any-order and
# several sources, recurring deadlines, large and poison messages, damaged
# records, an operator and a second runner), which is not in make test
# while the engine bugs it finds are open (docs/reliability.md).
SIM_SEEDS ?= 10000
SIM_FROM  ?= 1
WORKLOAD  ?= sales
sim:
	$(GO) test -count=1 -timeout 180m -v -run '^TestSimulation$$' ./internal/testrig/sim/ -args -sim.workload=$(WORKLOAD) \
		-sim.seeds=$(SIM_SEEDS) -sim.from=$(SIM_FROM) $(if $(ORDERS),-sim.orders=$(ORDERS)) $(if $(SEED),-sim.seed=$(SEED))

# The flagship example on the embedded store, in ./data: a second run adds
# to it, and demo-v2 runs version 2 of its model on the same data. The build
# comes first, so that a cold cache says what it is doing.
demo:
	@echo "building examples/reservation (a first build takes a minute or two)..."
	@$(GO) build -o /dev/null ./examples/reservation
	$(GO) run ./examples/reservation

demo-v2:
	@echo "building examples/reservation (a first build takes a minute or two)..."
	@$(GO) build -o /dev/null ./examples/reservation
	$(GO) run ./examples/reservation -v2 -orders 100

# The picture of one order's trace in docs/observability.md (issue 27): the
# flagship example traced (-trace) on a few orders, its sale process killed
# and restarted as always, and the order whose trace crosses the most
# processes drawn by internal/tools/tracepic.
.PHONY: trace-picture
trace-picture:
	@dir=$$(mktemp -d) && \
	$(GO) run ./examples/reservation -data $$dir/data -orders 12 -seed 27 -clients 3 -workers 3 -pace 20ms -payment-window 1s -trace $$dir/trace/reservation.jsonl && \
	$(GO) run ./internal/tools/tracepic -pick -o docs/observability-trace.svg $$dir/trace/reservation*.jsonl; \
	status=$$?; rm -rf "$$dir"; exit $$status

clean:
	$(GO) clean -testcache
