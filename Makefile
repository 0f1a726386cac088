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
# Tools the Makefile builds from tools/ (its own module, pinned in tools/go.mod) or installs.
TOOLS     := $(CURDIR)/.tools
# Every package's tests; the race detector is on. TEST_FLAGS adds to it (e.g. -run Sanity -v).
TEST_FLAGS ?=
# h2spec (HTTP/2 conformance), pinned with its dependencies by go.mod's tool directive, built
# into .tools when missing or when go.mod changes; test/attack runs it on both transports.
H2SPEC    := $(CURDIR)/.tools/bin/h2spec
# grpcurl and grpc_health_probe, pinned by tools/probes/go.mod's tool directives (a module of
# its own: their dependencies stay out of go.mod and tools/go.mod), built into .tools when
# missing or when that go.mod changes; proxy's and test/e2e's tests drive health and
# reflection with them (and the README's grpcurl recipe).
GRPCURL      := $(CURDIR)/.tools/bin/grpcurl
HEALTH_PROBE := $(CURDIR)/.tools/bin/grpc_health_probe
# protoc's plugins for `make generate` (internal/csiv0), pinned, installed into .tools;
# protoc-gen-go's version is go.mod's google.golang.org/protobuf.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.5.1
PROTOC_GEN_GO      := $(CURDIR)/.tools/protoc-gen-go-$(PROTOC_GEN_GO_VERSION)/protoc-gen-go
PROTOC_GEN_GO_GRPC := $(CURDIR)/.tools/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)/protoc-gen-go-grpc

# The leftovers check (test/leftovers): make test and make e2e snapshot the machine's processes,
# mounts, loop devices, network namespaces, cgroups and network links before their tests and fail
# when the run left any of them behind, after a grace of 10 s (also when the tests failed: then
# both are reported). Every process the run starts carries CSIGWTEST_LEFTOVERS_RUN (a sub-make keeps
# the parent's): that, or a working directory or executable under the checkout, is how the check
# tells the run's processes from other jobs'. LEFTOVERS_IGNORE: a regular expression of report
# lines not to count, for what another job on the same machine adds.
LEFTOVERS        := $(TOOLS)/leftovers
LEFTOVERS_IGNORE ?=
LEFTOVERS_SNAPSHOT = $(RUN_DIR)/leftovers-$@.json
LEFTOVERS_CHECK    = $(LEFTOVERS) check $(if $(LEFTOVERS_IGNORE),-ignore '$(LEFTOVERS_IGNORE)') $(LEFTOVERS_SNAPSHOT)
ifndef CSIGWTEST_LEFTOVERS_RUN
export CSIGWTEST_LEFTOVERS_RUN := $(shell date +%s%N)
endif

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

.PHONY: help build run test test-deps fuzz fuzz-short bench lint fmt clean release release-binaries image licenses licenses-check generate protoc protoc-if-root

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
# tests by CSIGWTEST_ETCD. A separate binary rather than etcd's server/v3/embed in the test
# binaries: the gateway's go.mod keeps only the client, and etcd runs at full speed in
# processes of its own, which the tests kill like crashes, not under the race detector.
# csi-test's mock driver (CSIGWTEST_MOCK_DRIVER) is built the same way, for the tap's sanity test.
# csi-test v0.3.5's v0 mock driver and v0 sanity binary (CSIGWTEST_V0_MOCK_DRIVER, CSIGWTEST_V0_SANITY)
# likewise, from its source on the shelf, outside this module: its csi.v0 types never meet
# internal/csiv0's in one binary. protoc and the pinned plugins let internal/csiv0's test
# check that the committed generated code is current.
test: test-deps lint protoc-if-root $(H2SPEC) $(GRPCURL) $(HEALTH_PROBE) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) $(LEFTOVERS) ## run every test (race detector on; mount tests need root; h2spec on both transports; grpcurl, grpc_health_probe; a real etcd; protoc), then a short fuzz run; fail if they leave anything behind
	@$(E2E_COMPONENTS) etcd-ledger mock-driver v0-mock-driver v0-sanity
	@mkdir -p $(RUN_DIR) && $(LEFTOVERS) snapshot $(LEFTOVERS_SNAPSHOT)
	H2SPEC=$(H2SPEC) GRPCURL=$(GRPCURL) GRPC_HEALTH_PROBE=$(HEALTH_PROBE) CSIGWTEST_ETCD=$$($(E2E_COMPONENTS) --path etcd-ledger) \
		CSIGWTEST_MOCK_DRIVER=$$($(E2E_COMPONENTS) --path mock-driver) \
		CSIGWTEST_V0_MOCK_DRIVER=$$($(E2E_COMPONENTS) --path v0-mock-driver) CSIGWTEST_V0_SANITY=$$($(E2E_COMPONENTS) --path v0-sanity) \
		CSIGWTEST_PROTOC_GEN_GO=$(PROTOC_GEN_GO) CSIGWTEST_PROTOC_GEN_GO_GRPC=$(PROTOC_GEN_GO_GRPC) $(GO) test -race -count=1 -timeout 12m $(TEST_FLAGS) ./... \
		|| { $(LEFTOVERS_CHECK); exit 1; }
	@$(MAKE) --no-print-directory fuzz-short || { $(LEFTOVERS_CHECK); exit 1; }
	@$(LEFTOVERS_CHECK)

$(LEFTOVERS): $(wildcard test/leftovers/*.go)
	$(GO) build -o $@ ./test/leftovers

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

lint: $(STATICCHECK) licenses-check ## gofmt check, go vet, staticcheck (pinned, installed into .tools), THIRD_PARTY_NOTICES current
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	GOBIN=$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Generated code: internal/csiv0 (the CSI v0 spec's messages, descriptors and gRPC stubs) from
# internal/csiv0/proto with Debian's protoc (protobuf-compiler, 3.21.12; installed as root when
# missing) and the plugins pinned here, installed into .tools like staticcheck.
# The versions and paths are set at the top (make test needs them too).

generate: protoc $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) ## regenerate internal/csiv0 (CSI v0) with protoc and the pinned protoc-gen-go, protoc-gen-go-grpc
	PROTOC_GEN_GO=$(PROTOC_GEN_GO) PROTOC_GEN_GO_GRPC=$(PROTOC_GEN_GO_GRPC) internal/csiv0/generate.sh

# install-protoc FAIL: installs Debian's protobuf-compiler when protoc is missing (root with
# apt-get), or says what to install and exits with FAIL (1 for make generate; 0 for make test,
# whose generated-code test then skips, saying so).
install-protoc = if ! command -v protoc >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing protobuf-compiler (protoc)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler libprotobuf-dev >/dev/null; \
	  else echo "protoc is missing: install protoc 3.21.12 (Debian: apt-get install protobuf-compiler libprotobuf-dev) and put it on PATH"; exit $(1); fi; \
	fi

protoc:
	@$(call install-protoc,1)

protoc-if-root:
	@$(call install-protoc,0)

$(PROTOC_GEN_GO):
	GOBIN=$(dir $@) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(PROTOC_GEN_GO_GRPC):
	GOBIN=$(dir $@) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# THIRD_PARTY_NOTICES: every module linked into the binary (on RELEASE_PLATFORMS), its licence
# (only licences compatible with Apache-2.0 pass) and text. `make licenses` rewrites it after a
# go.mod change; `make licenses-check` (in lint) fails while it is stale.
NOTICES_FLAGS = -platforms $(subst $(eval) ,$(comma),$(RELEASE_PLATFORMS))
comma := ,
licenses: $(TOOLS)/notices ## regenerate THIRD_PARTY_NOTICES (after a go.mod change)
	$(TOOLS)/notices $(NOTICES_FLAGS)

licenses-check: $(TOOLS)/notices
	@$(TOOLS)/notices -check $(NOTICES_FLAGS)

$(TOOLS)/notices: tools/go.mod tools/go.sum $(wildcard tools/notices/*.go)
	cd tools && $(GO) build -o $@ ./notices

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')

clean: ## remove build output and .run
	rm -rf bin dist $(RUN_DIR)

# A release: static binaries for every platform of RELEASE_PLATFORMS, a CycloneDX SBOM of each,
# the multi-platform container image as an OCI layout tar (no container engine, no registry:
# tools/ocimage) and SHA256SUMS of them all, in dist/. The image's labels name the commit,
# and its time stamps are the commit's (SOURCE_DATE_EPOCH), so a release is reproducible.
DIST              := dist
RELEASE_PLATFORMS := linux/amd64 linux/arm64
IMAGE_REPO        ?= ghcr.io/csi-gateway/csi-gateway
IMAGE_SOURCE      := https://github.com/csi-gateway/csi-gateway
REVISION          := $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
# Copied into the image for TLS to appliances whose CA is not pinned; none if absent.
CA_BUNDLE         ?= /etc/ssl/certs/ca-certificates.crt

release: $(TOOLS)/cyclonedx-gomod ## dist/: linux/amd64 and linux/arm64 binaries, their SBOMs, the container image, SHA256SUMS
	@rm -rf $(DIST)
	@$(MAKE) --no-print-directory image
	@# From each binary's build information: exactly the modules linked in. GOPROXY=off: the
	@# licences are read from the module cache, and the main module is not looked up anywhere.
	@for p in $(RELEASE_PLATFORMS); do f=$(DIST)/csi-gateway-$${p%/*}-$${p#*/}; \
	  GOPROXY=off $(TOOLS)/cyclonedx-gomod bin -json -licenses -std -noserial -version $(VERSION) -output $$f.cdx.json $$f 2>&1 \
	    | grep -v 'csi-gateway/csi-gateway@\|std@'; [ -s $$f.cdx.json ] || exit 1; \
	  echo "sbom $$f.cdx.json: $$(grep -c '"type": "library"' $$f.cdx.json) components"; \
	done
	@cd $(DIST) && sha256sum * >SHA256SUMS
	@echo "$(DIST)/ ($(VERSION)):"; ls -l $(DIST) | tail -n +2

release-binaries:
	@mkdir -p $(DIST)
	@for p in $(RELEASE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; echo "build $(DIST)/csi-gateway-$$os-$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(DIST)/csi-gateway-$$os-$$arch ./cmd/csi-gateway || exit 1; \
	done

image: release-binaries $(TOOLS)/ocimage ## dist/csi-gateway-image.tar: the multi-platform image (OCI layout), non-root, from scratch
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(TOOLS)/ocimage -out $(DIST)/csi-gateway-image.tar -name $(IMAGE_REPO):$(VERSION) \
	  -version $(VERSION) -revision $(REVISION) -source $(IMAGE_SOURCE) -ca-bundle '$(wildcard $(CA_BUNDLE))' \
	  $(foreach p,$(RELEASE_PLATFORMS),$(p)=$(DIST)/csi-gateway-$(subst /,-,$(p)))

$(TOOLS)/ocimage: tools/go.mod tools/go.sum $(wildcard tools/ocimage/*.go)
	cd tools && $(GO) build -o $@ ./ocimage

# Pinned by the tool directive of tools/go.mod.
$(TOOLS)/cyclonedx-gomod: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $@ github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

# deploy/ and the end-to-end run against real orchestrators (test/orchestrators, its own
# module). The orchestrators (etcd, kube-apiserver, kube-controller-manager, csi-provisioner,
# csi-attacher, Nomad, Helm, and E2E_NODE_COMPONENTS for the kubelet node) are built from the
# Go module proxy at pinned versions (or from ../shared's source archives, the sidecars it does
# not serve), once, into E2E_CACHE, and reused by later runs.
E2E_CACHE   ?= $(HOME)/.cache/csi-gateway-e2e
E2E_FLAGS   ?=
E2E_COMPONENTS := CSIGWTEST_E2E_CACHE=$(E2E_CACHE) test/orchestrators/build-components.sh
HELM_CHART  := deploy/helm/csi-gateway

.PHONY: e2e e2e-node deploy-lint

# deploy-lint's schemas: the OpenAPI document of Kubernetes 1.31 from the Go module cache, and
# the CRDs of cert-manager and the Prometheus Operator (build-components.sh copies them from
# their modules), so Certificates and PodMonitors are validated as strictly as the rest.
K8S_OPENAPI_MODULE   := k8s.io/kubernetes@v1.31.4
# moddir MODULE@VERSION: the module's directory in the module cache (downloaded on first use).
moddir = $(shell cd tools && $(GO) mod download -json $(1) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p')

# The test builds its own csi-gateway binary from this tree (bin/ is left alone).
e2e: deploy-lint $(LEFTOVERS) ## deploy-lint, then a Kubernetes control plane + sidecars, a Nomad agent and a real kubelet node driving the gateway (root; first run builds them); fail if they leave anything behind
	@start=$$(date +%s); $(E2E_COMPONENTS) && $(E2E_NODE_PREP) || exit 1; echo "e2e: components ready in $$(( $$(date +%s) - start ))s"
	@mkdir -p $(RUN_DIR) && $(LEFTOVERS) snapshot $(LEFTOVERS_SNAPSHOT)
	cd test/orchestrators && CSIGWTEST_E2E_NODE=1 CSIGWTEST_E2E_CACHE=$(E2E_CACHE) $(GO) test -count=1 -v -timeout 40m $(E2E_FLAGS) ./... \
		|| { $(LEFTOVERS_CHECK); exit 1; }
	@$(LEFTOVERS_CHECK)

# make e2e-node: only TestKubeletNode (make e2e runs it after TestOrchestrators), the real
# kubelet node (test/orchestrators/node_test.go):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet, containerd and
# runc (Debian packages, installed by install-node-packages.sh as root), a CNI bridge, all
# inside network and mount namespaces the test creates, running deploy/kubernetes/bridge and
# the Helm chart with images built here (no registry).
E2E_NODE_COMPONENTS := kube-scheduler kubelet csi-resizer csi-snapshotter snapshot-controller snapshot-crds node-driver-registrar mock-driver
E2E_NODE_PREP       := test/orchestrators/install-node-packages.sh && $(E2E_COMPONENTS) $(E2E_NODE_COMPONENTS)
e2e-node: $(LEFTOVERS) ## only the real kubelet node of make e2e: deploy/kubernetes/bridge and the Helm chart running a StatefulSet's volume (root); fail if it leaves anything behind
	@if [ "$$(id -u)" != 0 ]; then echo "e2e-node: skipped: it needs root (network and mount namespaces, containerd, loop devices)"; exit 0; fi; \
	start=$$(date +%s); $(E2E_COMPONENTS) etcd kube-apiserver kube-controller-manager csi-provisioner csi-attacher helm && $(E2E_NODE_PREP) || exit 1; \
	echo "e2e-node: packages and components ready in $$(( $$(date +%s) - start ))s"
	@mkdir -p $(RUN_DIR) && $(LEFTOVERS) snapshot $(LEFTOVERS_SNAPSHOT)
	cd test/orchestrators && CSIGWTEST_E2E_NODE=1 CSIGWTEST_E2E_CACHE=$(E2E_CACHE) $(GO) test -count=1 -v -timeout 20m -run '^TestKubeletNode$$' $(E2E_FLAGS) . \
		|| { $(LEFTOVERS_CHECK); exit 1; }
	@$(LEFTOVERS_CHECK)

$(TOOLS)/deploylint: tools/go.mod tools/go.sum $(wildcard tools/deploylint/*.go)
	cd tools && $(GO) build -o $@ ./deploylint

deploy-lint: $(TOOLS)/deploylint ## helm lint + every chart rendering and kustomize overlay validated strictly against the Kubernetes 1.31 schemas
	@$(E2E_COMPONENTS) helm cert-manager-crds prometheus-operator-crds
	@cd tools && $(GO) vet ./... && $(GO) test -count=1 ./...
	@helm=$$($(E2E_COMPONENTS) --path helm); d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; args=(); \
	for v in "" $(HELM_CHART)/ci/*.yaml; do \
	  name="helm template $${v:+-f ci/$${v##*/}}"; name=$${name% }; [ -n "$$v" ] || name="helm template (default values)"; \
	  echo "helm lint --strict, $$name"; \
	  out=$$($$helm lint --strict $(HELM_CHART) $${v:+-f $$v} 2>&1) || { echo "$$out"; exit 1; }; \
	  f=$$d/$${#args[@]}.yaml; $$helm template csi-gateway $(HELM_CHART) --namespace csi-gateway $${v:+-f $$v} >$$f || exit 1; \
	  args+=("$$name=$$f"); \
	done; \
	echo "helm lint --strict with a misspelled value (controler.replicas) must fail"; \
	if $$helm lint --strict $(HELM_CHART) --set controler.replicas=2 >/dev/null 2>&1; then \
	  echo "deploy-lint: values.schema.json admitted a misspelled key"; exit 1; fi; \
	echo "helm template of a bbolt ledger with 3 central replicas must fail"; \
	if $$helm template $(HELM_CHART) -f $(HELM_CHART)/ci/central-values.yaml --set central.replicas=3 >/dev/null 2>&1; then \
	  echo "deploy-lint: the chart rendered 3 central replicas on one bbolt file"; exit 1; fi; \
	command -v kubectl >/dev/null || { echo "deploy-lint: kubectl (with its kustomize) is needed"; exit 1; }; \
	mkdir $$d/with-mounts; printf 'resources: [%s]\ncomponents: [%s]\n' $$(realpath --relative-to=$$d/with-mounts deploy/kubernetes/bridge deploy/kubernetes/components/node-mounts) >$$d/with-mounts/kustomization.yaml; \
	for k in $$(grep -rL '^kind: Component' $$(find deploy/kubernetes -name kustomization.yaml) | xargs -n1 dirname | sort) $$d/with-mounts; do \
	  name="kustomize $$k"; [ "$$k" != $$d/with-mounts ] || name="kustomize deploy/kubernetes/bridge + components/node-mounts"; \
	  f=$$d/$${#args[@]}.yaml; kubectl kustomize $$k >$$f || exit 1; args+=("$$name=$$f"); \
	done; \
	crds=$$(ls $$($(E2E_COMPONENTS) --path cert-manager-crds)/*.yaml $$($(E2E_COMPONENTS) --path prometheus-operator-crds)/*.yaml | paste -sd,); \
	start=$$(date +%s); \
	$(TOOLS)/deploylint -openapi $(call moddir,$(K8S_OPENAPI_MODULE))/api/openapi-spec/swagger.json -crds $$crds "$${args[@]}" || exit 1; \
	echo "deploy-lint: $${#args[@]} renderings validated strictly in $$(( $$(date +%s) - start ))s"
	@if command -v systemd-analyze >/dev/null; then \
	  echo "systemd-analyze verify: deploy/systemd/csi-gateway.service"; \
	  d=$$(mktemp -d); sed 's#^ExecStart=/usr/local/bin/csi-gateway#ExecStart=/bin/true#' deploy/systemd/csi-gateway.service >$$d/csi-gateway.service; \
	  systemd-analyze verify $$d/csi-gateway.service; rc=$$?; rm -rf $$d; exit $$rc; \
	fi
