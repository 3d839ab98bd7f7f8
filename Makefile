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
lint: ## go vet, gofmt check, go.mod tidiness (internal/tools too) and api-check.
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	cd internal/tools && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) mod tidy -diff
	@$(MAKE) --no-print-directory api-check

# apirecord keeps the record of the public API in api/ (docs/API.md). It lives in a module
# of its own, internal/tools, built outside any go.work; it loads the repository's
# packages with the caller's GOWORK.
APIRECORD = cd internal/tools && GOWORK=off APIRECORD_GOWORK="$$GOWORK" $(GO) run ./apirecord -root ../..

.PHONY: api
api: ## Rewrite the API record in api/ from the current tree (docs/API.md).
	$(APIRECORD) -w

.PHONY: api-check
api-check: ## Fail if api/ is out of date or a commit changed it incompatibly without an API-Change: line.
	$(APIRECORD) -check -history

.PHONY: tools-test
tools-test: ## Test internal/tools (the API record's tool).
	cd internal/tools && GOWORK=off $(GO) test ./...

.PHONY: db-up
db-up: ## Start throwaway PostgreSQL and MariaDB on 127.0.0.1 and print their env, one KEY=value per line (DB=mysql for one).
	@for db in $(DB); do scripts/testdb.sh start $$db || exit 1; done

.PHONY: db-down
db-down: ## Stop servers started by db-up: make db-down DIR="<OUTBOX_TEST_POSTGRES_DIR> <OUTBOX_TEST_MYSQL_DIR>".
	@for dir in $(DIR); do scripts/testdb.sh stop "$$dir" || exit 1; done
