# csi-gateway — `make help` lists the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

GO        ?= go
BIN       := bin/csi-gateway
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
RUN_DIR   := $(CURDIR)/.run
# make run's admin listener (/metrics, /readyz, the tap): the README's observability commands use it.
RUN_ADMIN ?= 127.0.0.1:9808
# Every package's tests; the race detector is on. TEST_FLAGS adds to it (e.g. -run Sanity -v).
TEST_FLAGS ?=
# h2spec (HTTP/2 conformance), pinned with its dependencies by go.mod's tool directive, built
# into .tools when missing or when go.mod changes; test/attack runs it on both transports.
H2SPEC    := $(CURDIR)/.tools/bin/h2spec
# grpcurl and grpc_health_probe, pinned by tools/probes/go.mod's tool directives (a module of its
# own: their dependencies stay out of go.mod), built into .tools when missing or when that go.mod
# changes; proxy's tests and the README quick start test drive health and reflection with them.
GRPCURL      := $(CURDIR)/.tools/bin/grpcurl
HEALTH_PROBE := $(CURDIR)/.tools/bin/grpc_health_probe

# The fuzz targets, as "package:Target"; `make fuzz` runs each for FUZZTIME (a duration, or
# a count of executions such as 1000000x); `make test` runs each for FUZZTIME_SHORT.
FUZZ_TARGETS := ./backends/embedded:FuzzDecodeToken ./backends/embedded:FuzzParseMountFlags \
	./backends/embedded:FuzzParseExt4Size ./backends/rest:FuzzDecodeError \
	./backends/rest/connect:FuzzHandlerBody ./proxy:FuzzValidateRequest ./csispec:FuzzCheck ./redact:FuzzRedact ./redact:FuzzScrub ./internal/protoread:FuzzWireString ./proxy/tenancy:FuzzScopeID ./proxy/tenancy:FuzzOpenToken \
	./internal/h2grpc:FuzzTimeout ./internal/h2grpc:FuzzHeaderReader
FUZZTIME       ?= 1m
# make test's short run is a count of executions, not a duration: with a duration, Go 1.26's
# fuzz coordinator can fail a target with a bare "context deadline exceeded" when a worker
# misses the deadline on a loaded machine (golang/go#75804, fixed in Go 1.27). A count has no
# deadline to miss: a slow machine only takes longer.
FUZZTIME_SHORT ?= 2000x
# How long minimizing a new interesting input may take: a count too.
FUZZMINIMIZE   ?= 200x

.PHONY: help build run test test-deps fuzz fuzz-short bench lint fmt clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/csi-gateway (static)
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/csi-gateway

run: build ## start the gateway on .run/csi.sock with the embedded appliance (data in .run/data), admin on 127.0.0.1:9808
	@mkdir -p $(RUN_DIR)
	@echo "csi-gateway: CSI socket unix://$(RUN_DIR)/csi.sock, embedded appliance, data in $(RUN_DIR)/data, admin http://$(RUN_ADMIN)"
	@echo "In another shell:"
	@echo "  export CSI_ENDPOINT=unix://$(RUN_DIR)/csi.sock"
	@echo "  $(BIN) call info"
	@echo "  $(BIN) call create-volume demo --size 1Gi"
	@echo "  $(BIN) call list-volumes"
	@echo "  $(BIN) tap --admin $(RUN_ADMIN)"
	@echo "Stop with Ctrl-C."
	$(BIN) serve --endpoint unix://$(RUN_DIR)/csi.sock --data-dir $(RUN_DIR)/data --admin $(RUN_ADMIN) --log-format text

# The tenancy ledger's etcd tests start a real 3-member etcd: the pinned server, built once
# from the module proxy into E2E_CACHE (about 80 s of CPU cold; nothing warm) and named to the
# tests by CSIGW_ETCD. A separate binary rather than etcd's server/v3/embed in the test
# binaries: the gateway's go.mod keeps only the client, and etcd runs at full speed in
# processes of its own, which the tests kill like crashes, not under the race detector.
test: test-deps lint $(H2SPEC) $(GRPCURL) $(HEALTH_PROBE) ## run every test (race detector on; mount tests need root; h2spec on both transports; grpcurl, grpc_health_probe; a real etcd), then a short fuzz run
	@$(E2E_COMPONENTS) etcd-ledger
	H2SPEC=$(H2SPEC) GRPCURL=$(GRPCURL) GRPC_HEALTH_PROBE=$(HEALTH_PROBE) CSIGW_ETCD=$$($(E2E_COMPONENTS) --path etcd-ledger) $(GO) test -race -count=1 -timeout 12m $(TEST_FLAGS) ./...
	@$(MAKE) --no-print-directory fuzz-short

fuzz: ## run every fuzz target for FUZZTIME (default 1m; e.g. FUZZTIME=1000000x)
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg || exit 1; done

$(H2SPEC): go.mod go.sum
	$(GO) build -o $@ github.com/summerwind/h2spec/cmd/h2spec

$(GRPCURL): tools/probes/go.mod tools/probes/go.sum
	cd tools/probes && $(GO) build -o $@ github.com/fullstorydev/grpcurl/cmd/grpcurl

$(HEALTH_PROBE): tools/probes/go.mod tools/probes/go.sum
	cd tools/probes && $(GO) build -o $@ github.com/grpc-ecosystem/grpc-health-probe

fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

# The node tests and csi-sanity's node specs need mkfs.ext4, resize2fs, blkid and losetup.
# As root they are installed from Debian's packages when missing; otherwise those tests skip.
test-deps:
	@missing=""; for t in mkfs.ext4 resize2fs blkid losetup; do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing e2fsprogs util-linux (missing:$$missing)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq e2fsprogs util-linux mount >/dev/null; \
	  else echo "warning: missing$$missing; node tests will skip"; fi; \
	fi

# `make bench` runs test/bench: a CSI driver reached directly, through the gateway (passthrough and
# every feature on, each on grpc-go, the default transport, and on frames), haproxy, socat and the
# gateway's bare HTTP/2 transport (the floor), side by side in one run, then a soak of a million calls
# through the full gateway (is its heap flat?), then the redaction micro-benchmark; it prints the
# report and writes it to BENCH_OUT (about 9 minutes, plus 2–8 for the soak). As root it
# installs haproxy and socat from Debian's packages when missing. BENCH_WINDOW is each relay's
# measured turn, BENCH_ROUNDS how many turns; BENCH_FLAGS adds flags (`go run ./test/bench -h`),
# e.g. BENCH_FLAGS='-relays direct,full -concurrency 16', or '-soak 0' to skip the soak. `make bench-micro` runs every
# package's `go test` benchmarks.
BENCH_WINDOW ?= 1500ms
BENCH_ROUNDS ?= 3
BENCH_OUT    ?= docs/benchmarks.md
BENCH_FLAGS  ?=
.PHONY: bench-micro

bench: build ## measure the gateway against a direct connection, haproxy, socat and its bare transport; write docs/benchmarks.md
	$(GO) run ./test/bench -gateway $(CURDIR)/$(BIN) -window $(BENCH_WINDOW) -rounds $(BENCH_ROUNDS) -out $(BENCH_OUT) $(BENCH_FLAGS)

bench-micro: ## run every package's go test benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...

# staticcheck, pinned: installed into .tools/staticcheck-VERSION/ on first use (and again when
# the version changes) with `go install`, from the module proxy like any dependency.
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := $(CURDIR)/.tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck

lint: $(STATICCHECK) ## gofmt check, go vet and staticcheck (pinned, installed into .tools)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	GOBIN=$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')

clean: ## remove build output and .run
	rm -rf bin $(RUN_DIR)

# deploy/ and the end-to-end run against real orchestrators (test/orchestrators, its own
# module). The orchestrators (etcd, kube-apiserver, kube-controller-manager, csi-provisioner,
# csi-attacher, Nomad, Helm) are built from the Go module proxy at pinned versions, once, into
# E2E_CACHE, and reused by later runs.
E2E_CACHE   ?= $(HOME)/.cache/csi-gateway-e2e
E2E_FLAGS   ?=
E2E_COMPONENTS := CSIGW_E2E_CACHE=$(E2E_CACHE) test/orchestrators/build-components.sh
HELM_CHART  := deploy/helm/csi-gateway

.PHONY: e2e deploy-lint

# The test builds its own csi-gateway binary from this tree (bin/ is left alone).
e2e: ## Kubernetes control plane + sidecars and a Nomad agent driving the gateway (root; first run builds them)
	@start=$$(date +%s); $(E2E_COMPONENTS); echo "e2e: components ready in $$(( $$(date +%s) - start ))s"
	cd test/orchestrators && CSIGW_E2E_CACHE=$(E2E_CACHE) $(GO) test -count=1 -v -timeout 30m $(E2E_FLAGS) ./...

deploy-lint: ## helm lint + template of every deployment, kustomize build of every overlay
	@$(E2E_COMPONENTS) helm
	@helm=$$($(E2E_COMPONENTS) --path helm); \
	for v in "" $(HELM_CHART)/ci/*.yaml; do \
	  echo "helm lint --strict, helm template: $${v:-default values}"; \
	  out=$$($$helm lint --strict $(HELM_CHART) $${v:+-f $$v} 2>&1) || { echo "$$out"; exit 1; }; \
	  $$helm template csi-gateway $(HELM_CHART) $${v:+-f $$v} >/dev/null || exit 1; \
	done
	@command -v kubectl >/dev/null || { echo "deploy-lint: kubectl (with its kustomize) is needed"; exit 1; }; \
	for k in $$(grep -rL '^kind: Component' $$(find deploy/kubernetes -name kustomization.yaml) | xargs -n1 dirname | sort); do \
	  echo "kustomize build: $$k"; kubectl kustomize $$k >/dev/null || exit 1; \
	done
	@if command -v systemd-analyze >/dev/null; then \
	  echo "systemd-analyze verify: deploy/systemd/csi-gateway.service"; \
	  d=$$(mktemp -d); sed 's#^ExecStart=/usr/local/bin/csi-gateway#ExecStart=/bin/true#' deploy/systemd/csi-gateway.service >$$d/csi-gateway.service; \
	  systemd-analyze verify $$d/csi-gateway.service; rc=$$?; rm -rf $$d; exit $$rc; \
	fi
