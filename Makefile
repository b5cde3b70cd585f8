# Build and test smarter-compact. The binary needs cgo (github.com/mattn/go-sqlite3, so a C
# compiler) and the sqlite_fts5 build tag (full-text search in the context store).

GO      ?= go
TAGS    := sqlite_fts5
BIN     := bin/smarter-compact
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/smarter-compact/smarter-compact/app.version=$(VERSION)
# Extra flags for `make run`, e.g. make run ARGS='--port 4200'.
ARGS    ?=

export CGO_ENABLED := 1

## hygiene: no tracked file over 1 MB, no tracked executable (.ci/tracked-files)
hygiene:
	@bash .ci/tracked-files

.PHONY: hygiene build run test fmt-check templ-check vet race e2e clean bench

## build: bin/smarter-compact
build:
	$(GO) build -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) .

## run: build, then run the service in the foreground on 127.0.0.1:4100 (Ctrl-C stops it)
run: build
	./$(BIN) serve $(ARGS)

## test: gofmt check, generated templ code up to date, go vet, then every unit test
## (hermetic: temp dirs, loopback only)
test: hygiene fmt-check templ-check vet
	$(GO) test -tags '$(TAGS)' -count=1 ./...

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

## e2e: end-to-end tests (build tag e2e, named TestE2E…): the real agent CLIs (Claude Code, Codex,
## OpenCode) through the real `serve` against a scripted strict fake model. Each CLI comes from
## SMARTER_COMPACT_E2E_CLAUDE, SMARTER_COMPACT_E2E_CODEX or SMARTER_COMPACT_E2E_OPENCODE, else
## `claude`, `codex` or `opencode` on PATH; without it its test skips and says why
## (SMARTER_COMPACT_E2E_REQUIRE=1 makes that a failure). bash .ci/run installs all three into
## .cache/e2e-clients. The dashboard test drives Chromium (SMARTER_COMPACT_E2E_CHROMIUM, else
## chromium on PATH) and saves screenshots under SMARTER_COMPACT_E2E_ARTIFACTS; the tray test
## starts its own dbus-daemon.
e2e:
	$(GO) vet -tags '$(TAGS) e2e' ./app/
	$(GO) test -tags '$(TAGS) e2e' ./app/ -run E2E -count=1 -v

clean:
	rm -rf bin

## bench: build, then measure on this machine (cmd/bench): proxy overhead against a bare reverse
## proxy, long sessions replayed against the fake's prompt cache, the store at scale; writes
## docs/benchmarks.md and docs/bench/*.svg (about 10 minutes on 2 cores). BENCH_ARGS adds flags,
## e.g. make bench BENCH_ARGS=-quick
BENCH_ARGS ?=
bench: build
	$(GO) run -tags '$(TAGS)' ./cmd/bench -bin $(BIN) -out docs $(BENCH_ARGS)
