# Build and test smarter-compact. The binary needs cgo (github.com/mattn/go-sqlite3, so a C
# compiler) and the sqlite_fts5 build tag (full-text search in the context store).

GO      ?= go
TAGS    := sqlite_fts5
BIN     := bin/smarter-compact
# The semantic version from the git tags (packaging/version.sh says which form when);
# make VERSION=… overrides it. The second line runs the script once, not at every use.
VERSION ?= $(shell bash packaging/version.sh)
VERSION := $(VERSION)
LDFLAGS := -X github.com/smarter-compact/smarter-compact/app.version=$(VERSION)
# Extra flags for `make run`, e.g. make run ARGS='--port 4200'.
ARGS    ?=

export CGO_ENABLED := 1

## hygiene: no tracked file over 1 MB, no tracked executable (.ci/tracked-files)
hygiene:
	@bash .ci/tracked-files

## lint: staticcheck (pinned in .ci/tools/go.mod; policy in staticcheck.conf), unit and e2e
## files alike
lint:
	$(GO) tool -modfile=.ci/tools/go.mod staticcheck -tags '$(TAGS) e2e' ./...

## vet-cross: go vet of every package and test file for windows/amd64 (cgo with mingw-w64)
## and of what builds without cgo for darwin/arm64 (.ci/vet-cross)
vet-cross:
	@bash .ci/vet-cross

.PHONY: lint vet-cross hygiene build run test fmt-check templ-check vet race e2e clean bench dist

## build: bin/smarter-compact
build:
	$(GO) build -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) .

## dist: every release artifact this machine can build, into dist/ (emptied first): the
## hardened Linux binary's tar.gz, .deb and .rpm, the Windows zip and MSI when
## packaging/windows/build.sh exists, and smarter-compact_<version>_checksums.txt
## (packaging/dist.sh; packaging/README.md lists the tools it needs)
dist:
	VERSION='$(VERSION)' bash packaging/dist.sh

## run: build, then run the service in the foreground on 127.0.0.1:4100 (Ctrl-C stops it)
run: build
	./$(BIN) serve $(ARGS)

## test: gofmt check, generated templ code up to date, go vet, then every unit test
## (hermetic: temp dirs, loopback only; the tests that build the binary, drive real CLIs or
## soak for a minute have build tag e2e and run in `make e2e`). It runs with -short, which only
## sizes the proxy's generated-conversation property tests at 100 conversations instead of
## 1,000 (about 3 minutes of the run); `make e2e` runs them at full size.
test: hygiene fmt-check templ-check vet
	$(GO) test -tags '$(TAGS)' -short -count=1 ./...

fmt-check:
	@files=$$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -not -name '*_templ.go' -exec gofmt -l {} +); \
	if [ -n "$$files" ]; then echo "gofmt -w needed on:"; echo "$$files"; exit 1; fi

## templ-check: the committed web/ui/*_templ.go match their .templ sources (regenerate with
## go tool templ generate)
templ-check:
	$(GO) tool templ generate -check

vet:
	$(GO) vet -tags '$(TAGS)' ./...

## race: the unit tests under the race detector (the first build takes a few minutes)
race:
	$(GO) test -race -tags '$(TAGS)' -count=1 ./...

## e2e: the end-to-end and slow tests (build tag e2e), which `make test` leaves out: in app/e2e
## the real agent CLIs (Claude Code, Codex, OpenCode) through the real `serve` against a
## scripted strict fake model (tests named TestE2E…), the built binary's stdio MCP server, and
## the one-minute soak of serve under eight writers and eight MCP readers; in cmd/bench the
## benchmark's -quick run; and the proxy's property tests at their full 1,000 conversations
## (make test runs them at 100). Each CLI comes from SMARTER_COMPACT_E2E_CLAUDE,
## SMARTER_COMPACT_E2E_CODEX or SMARTER_COMPACT_E2E_OPENCODE, else `claude`, `codex` or
## `opencode` on PATH; without it its test skips and says why (SMARTER_COMPACT_E2E_REQUIRE=1
## makes that a failure). bash .ci/run installs all three into .cache/e2e-clients. The
## dashboard test drives Chromium (SMARTER_COMPACT_E2E_CHROMIUM, else chromium on PATH) and
## saves screenshots under SMARTER_COMPACT_E2E_ARTIFACTS; the tray test starts its own
## dbus-daemon.
## The fault suite (app/e2e/fault_*_test.go, TestE2EFault…) runs the built serve into faults:
## config.toml a FIFO or /dev/zero (at start and while running), a slow request body, a silent
## upstream, and a session database written over with garbage, deleted, or made immutable
## (chattr +i: root only, else it skips and says why); the full disk is TestE2EHealthDiskFull.
## go test's default limit of 10 minutes per package could cut app/e2e short now that it also
## holds the one-minute soak; CI allows 90 minutes for everything.
E2E_PKGS := ./app/e2e/ ./cmd/bench/
e2e:
	$(GO) vet -tags '$(TAGS) e2e' $(E2E_PKGS)
	$(GO) test -tags '$(TAGS) e2e' $(E2E_PKGS) -count=1 -timeout 30m -v
	$(GO) test -tags '$(TAGS)' ./proxy/ -run 'TestPropertyGenerated' -count=1 -v

clean:
	rm -rf bin dist

## bench: build, then measure on this machine (cmd/bench): proxy overhead against a bare reverse
## proxy, long sessions replayed against the fake's prompt cache, the store at scale, search on a
## seeded session; writes docs/benchmarks.md with issue 18's aims and verdicts, and
## docs/bench/*.svg (and *.pprof, not committed). PEERS=1 adds the peer arm (claude-code-router
## from npm, cached in .cache/bench-peers). BENCH_ARGS adds flags, e.g. make bench BENCH_ARGS=-quick
BENCH_ARGS ?=
PEERS ?=
bench: build
	$(GO) run -tags '$(TAGS)' ./cmd/bench -bin $(BIN) -out docs $(if $(PEERS),-peers) $(BENCH_ARGS)
