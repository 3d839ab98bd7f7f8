# Outbox: common tasks. `make help` lists them.
.DEFAULT_GOAL := help
GO ?= go
# The repository is a workspace of modules (go.work lists them). `./...` stops at every
# nested go.mod, so the targets name all packages of all modules by import path.
PKGS ?= github.com/outboxkit/outbox/...
# go test's 10-minute limit per package is too short for the database tests on a busy
# machine (docs/testing.md); the README's test command, .ci/run and the test targets
# all use this.
TESTTIMEOUT ?= -timeout 30m
# DB lists the servers db-up starts.
DB ?= postgres mysql

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_\/-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run the quickstart example on SQLite (no server needed).
	$(GO) run ./examples/quickstart

.PHONY: test
test: ## Run all tests of all modules with the race detector (starts throwaway PostgreSQL and MariaDB if needed).
	$(GO) test -race $(TESTTIMEOUT) $(PKGS)

.PHONY: test-short
test-short: ## Run all tests of all modules without the race detector.
	$(GO) test $(TESTTIMEOUT) $(PKGS)

.PHONY: bench
bench: ## Run the benchmarks (docs/BENCHMARKS.md): the default workloads on SQLite, PostgreSQL and MariaDB, fast and durable servers, 5 rounds; BENCHFLAGS adds flags.
	$(GO) run ./cmd/outbox-bench -repeat 5 -durability fast,durable -json bench.json -md bench.md $(BENCHFLAGS)
	$(GO) test -run '^$$' -bench . -benchmem ./core/

CHAOS_DURATION ?= 2m
CHAOS_RESULTS ?= $(or $(TMPDIR),/tmp)/outbox-chaos-results.jsonl

.PHONY: chaos
chaos: ## Run the long fault tests (CHAOS_DURATION per scenario, seeds printed) and write docs/RELIABILITY.md.
	rm -f $(CHAOS_RESULTS)
	commit=$$(git describe --always --dirty 2>/dev/null); status=0; OUTBOX_CHAOS_LONG=1 OUTBOX_CHAOS_DURATION=$(CHAOS_DURATION) OUTBOX_CHAOS_RESULTS=$(CHAOS_RESULTS) \
		$(GO) test -race -count=1 -timeout 4h -v ./internal/chaos/ || status=$$?; \
	$(GO) run ./internal/chaos/cmd/scoreboard -o docs/RELIABILITY.md -commit "$$commit" $(CHAOS_RESULTS) && exit $$status

.PHONY: lint
lint: ## go vet, gofmt, staticcheck, tidy modules and go.work, the published modules' go.mod files, a stdlib-only root module, and api-check.
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@# staticcheck, pinned in internal/tools/go.mod, with its default checks, over every
	@# module of go.work and over internal/tools.
	@sc=$$(cd internal/tools && GOWORK=off $(GO) tool -n staticcheck) && \
		echo "staticcheck $(PKGS)" && $$sc $(PKGS) && \
		echo "staticcheck internal/tools" && (cd internal/tools && GOWORK=off $$sc ./...)
	$(MODULES) tidy -diff
	@# The published modules: no replace or exclude directive, no requirement of an
	@# unpublished module of this repository, and the root LICENSE in each (a nested
	@# module's zip holds only its directory).
	$(MODULES) check
	@# The root module (core, admin, ...) gives its users nothing but the standard library:
	@# its packages and their tests may use no module but goleak.
	@mods=$$(GOWORK=off $(GO) list -deps -test -f '{{with .Module}}{{.Path}}{{end}}' ./... | sort -u | grep -vx -e 'github.com/outboxkit/outbox' -e 'go.uber.org/goleak'); \
	if [ -n "$$mods" ]; then echo "the root module must stay stdlib-only, its packages or tests use:"; echo "$$mods"; exit 1; fi
	cd internal/tools && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) mod tidy -diff
	@$(MAKE) --no-print-directory api-check

# modules tidies the modules, checks the published ones and makes releases
# (internal/tools/modules, docs/modules.md). Like apirecord, it is built outside go.work.
MODULES = cd internal/tools && GOWORK=off $(GO) run ./modules -root ../..

# apirecord keeps the record of the public API in api/ (docs/API.md). It lives in a module
# of its own, internal/tools, built outside any go.work; it loads the repository's
# packages with the caller's GOWORK (APIRECORD_GOWORK comes before GOWORK=off: the shell
# expands it after the assignments to its left).
APIRECORD = cd internal/tools && APIRECORD_GOWORK="$$GOWORK" GOWORK=off $(GO) run ./apirecord -root ../..

.PHONY: api
api: ## Rewrite the API record in api/ from the current tree (docs/API.md).
	$(APIRECORD) -w

.PHONY: api-check
api-check: ## Fail if api/ is out of date or a commit changed it incompatibly without an API-Change: line.
	$(APIRECORD) -check -history

.PHONY: tools-test
tools-test: ## Test internal/tools (the API record's tool and the modules tool: tidy, check, release).
	cd internal/tools && GOWORK=off $(GO) test ./...

.PHONY: tidy
tidy: ## go mod tidy in every module, and go.work's replaces of the versions they require each other at.
	$(MODULES) tidy

# VERSION is the version make release releases; RELEASE=1 really releases.
VERSION ?=
RELEASE ?=
OUT ?=

.PHONY: release
release: ## Release VERSION=vX.Y.Z: a dry run (writes the modules to a proxy dir, OUT=dir); RELEASE=1 commits and tags (docs/modules.md).
	@[ -n "$(VERSION)" ] || { echo "usage: make release VERSION=vX.Y.Z [RELEASE=1] [OUT=dir]"; exit 2; }
	$(MODULES) release -version $(VERSION) $(if $(RELEASE),-tag) $(if $(OUT),-out $(abspath $(OUT)))

.PHONY: db-up
db-up: ## Start throwaway PostgreSQL and MariaDB on 127.0.0.1 and print their env, one KEY=value per line (DB=mysql for one).
	@for db in $(DB); do scripts/testdb.sh start $$db || exit 1; done

.PHONY: db-down
db-down: ## Stop servers started by db-up: make db-down DIR="<OUTBOX_TEST_POSTGRES_DIR> <OUTBOX_TEST_MYSQL_DIR>".
	@for dir in $(DIR); do scripts/testdb.sh stop "$$dir" || exit 1; done
