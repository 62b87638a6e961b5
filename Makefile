# reconciler — build, run and test. `make run` and `make test` are the quick start (README.md).
GO        ?= go
BIN       := bin/reconciler
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
# The version is internal/version.Current (a plain go build prints it too); the build adds the commit.
LDFLAGS   := -X main.commit=$(COMMIT)
CONFIG    ?= config.toml
FUZZTIME  ?= 10s
# Tests that start real processes and git servers need these; scripts/deps.sh installs or fails loudly.
export GIT_CONFIG_GLOBAL := /dev/null
export GIT_CONFIG_NOSYSTEM := 1

.PHONY: all build image run test test-short bench bench-http fuzz lint deps clean traffic

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/reconciler

## image: the container image (deploy/Containerfile) from what build writes, with the host's CA bundle
IMAGE     ?= localhost/reconciler:latest
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
image: build
	cp $(CA_BUNDLE) $(dir $(BIN))ca-certificates.crt
	podman build -f deploy/Containerfile -t $(IMAGE) $(dir $(BIN))

## run: one node on the embedded default repository seeded from policies.example/
run: build
	./$(BIN) serve --config $(CONFIG)

deps:
	@scripts/deps.sh

## test: lint, then every test (race detector on), including the ones that start real processes
test: deps lint
	$(GO) test -race -count=1 -timeout 20m ./...

test-short:
	$(GO) test -short -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## bench: bench-http, then the hot-path benchmarks (engine decisions, loopback HTTP vs a trivial handler, promotion, nginx auth_request and ext_authz gRPC latency)
bench: bench-http
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...
	RECONCILER_SYSTEM_BENCH=1 $(GO) test -count=1 -v -run '^TestBench' -timeout 30m ./test/system/
	RECONCILER_E2E_BENCH=1 $(GO) test -count=1 -v -run '^TestBench' -timeout 30m ./test/e2e/
	RECONCILER_PREVIEW_BENCH=1 $(GO) test -count=1 -v -run '^TestPreviewOverhead$$' -timeout 30m ./test/preview/
	RECONCILER_GATEWAY_BENCH=1 $(GO) test -count=1 -v -run '^TestBenchGateway$$' -timeout 10m ./test/gateway/
	RECONCILER_CONSOLE_BENCH=1 $(GO) test -count=1 -v -run '^TestBenchConsole$$' -timeout 30m ./test/console/
	RECONCILER_TLS_BENCH=1 $(GO) test -count=1 -v -run '^TestBenchAPITLS$$' ./internal/node/
	RECONCILER_LISTS_BENCH=1 $(GO) test -count=1 -v -run '^TestBenchListPush$$' -timeout 20m ./test/lists/

## bench-http: :evaluate side by side with net/http reference handlers under wrk, pinned (scripts/bench-http.sh);
## BENCH_LIST=1 adds the node with a 1,000,000-CIDR list, BENCH_OPA=1 OPA on 100,000 CIDRs
bench-http:
	@scripts/bench-http.sh

## fuzz: run every fuzz target briefly (FUZZTIME each)
fuzz:
	@FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

## traffic: regenerate policies.example/_traffic/sample.jsonl deterministically
traffic:
	$(GO) run ./tools/gentraffic -n 2500 -o policies.example/_traffic/sample.jsonl

clean:
	rm -rf bin data
