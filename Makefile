# Outbox: common tasks. `make help` lists them.
.DEFAULT_GOAL := help
GO ?= go
# DB lists the servers db-up starts.
DB ?= postgres mysql

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_\/-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run the quickstart example on SQLite (no server needed).
	$(GO) run ./examples/quickstart

.PHONY: test
test: ## Run all tests with the race detector (starts throwaway PostgreSQL and MariaDB if needed).
	$(GO) test -race ./...

.PHONY: test-short
test-short: ## Run all tests without the race detector.
	$(GO) test ./...

.PHONY: bench
bench: ## Run the benchmarks (docs/BENCHMARKS.md): every workload on SQLite, PostgreSQL and MariaDB, median of 3; BENCHFLAGS adds flags.
	$(GO) run ./cmd/outbox-bench -repeat 3 -json bench.json -md bench.md $(BENCHFLAGS)
	$(GO) test -run '^$$' -bench . -benchmem ./core/

CHAOS_DURATION ?= 2m
CHAOS_RESULTS ?= $(or $(TMPDIR),/tmp)/outbox-chaos-results.jsonl

.PHONY: chaos
chaos: ## Run the long fault tests (CHAOS_DURATION per scenario, seeds printed) and write docs/RELIABILITY.md.
	rm -f $(CHAOS_RESULTS)
	status=0; OUTBOX_CHAOS_LONG=1 OUTBOX_CHAOS_DURATION=$(CHAOS_DURATION) OUTBOX_CHAOS_RESULTS=$(CHAOS_RESULTS) \
		$(GO) test -race -count=1 -timeout 4h -v ./internal/chaos/ || status=$$?; \
	$(GO) run ./internal/chaos/cmd/scoreboard -o docs/RELIABILITY.md $(CHAOS_RESULTS) && exit $$status

.PHONY: lint
lint: ## go vet, gofmt check and go.mod tidiness.
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff

.PHONY: db-up
db-up: ## Start throwaway PostgreSQL and MariaDB on 127.0.0.1 and print their env, one KEY=value per line (DB=mysql for one).
	@for db in $(DB); do scripts/testdb.sh start $$db || exit 1; done

.PHONY: db-down
db-down: ## Stop servers started by db-up: make db-down DIR="<OUTBOX_TEST_POSTGRES_DIR> <OUTBOX_TEST_MYSQL_DIR>".
	@for dir in $(DIR); do scripts/testdb.sh stop "$$dir" || exit 1; done
