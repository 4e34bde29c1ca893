# Cairn's build, test, benchmark and lint entry points. CI runs `make test`
# through .ci/run on a fresh machine.

GO            ?= go
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Benchmarks run several times so that docs/benchmarks.md can record medians.
BENCH_COUNT   ?= 6
BENCH         ?= .
BENCH_PKGS    ?= ./...
TEST_TIMEOUT  ?= 14m

.PHONY: all build test bench lint demo fuzz torture clean

all: build lint test

build:
	$(GO) build ./...

# The PostgreSQL tests start a throwaway server of their own (internal/pgtest)
# unless CAIRN_POSTGRES_URL names one; KurrentDB tests need CAIRN_KURRENTDB_URL.
test:
	$(GO) vet ./...
	$(GO) test -race -timeout $(TEST_TIMEOUT) ./...
	@# The projection crash tests at the issue's full size (50k events, 30
	@# SIGKILLs): under the race detector above they run 5k events, as SQLite
	@# is ~40x slower there.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'Projections/Crash' ./projection/

# Full-size checks that take too long for every test run; each suite reads
# CAIRN_TORTURE=1 and runs at its issue's full size. Figures: docs/reliability.md.
TORTURE_TIMEOUT ?= 90m
torture:
	@# Linearizability of appends (issue 14): 5 histories of 64 clients x
	@# 20,000 operations per store, checked with porcupine; one package at
	@# a time, so that the checker has the cores to itself.
	CAIRN_TORTURE=1 $(GO) test -count=1 -p 1 -v -timeout $(TORTURE_TIMEOUT) -run 'TestLinearizable$$' ./eventstore/memory/ ./eventstore/sqlite/ ./eventstore/postgres/

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCH_COUNT) -timeout 60m $(BENCH_PKGS)

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# Each codec fuzz target for FUZZTIME (the seed corpora already run in `make test`).
FUZZTIME ?= 60s
FUZZ_TARGETS = FuzzDecode FuzzRoundTrip FuzzTransform FuzzRename FuzzSplit FuzzDrop
fuzz:
	@for f in $(FUZZ_TARGETS); do \
		echo "fuzz $$f for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./codec/ || exit 1; \
	done

# The flagship example on the embedded store; a second run reuses its data.
demo:
	$(GO) run ./examples/orders

clean:
	$(GO) clean -testcache
