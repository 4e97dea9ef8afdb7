# Tidal's build, test and sandbox commands. See README.md.

SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := build

GO        ?= go
# go.mod's toolchain line names the Go that builds and tests Tidal; auto
# fetches it through the Go module proxy when the local Go is older (a Go
# install's own default, GOTOOLCHAIN=local, would ignore the line). The
# modules under test/ name no toolchain and build with the local Go.
GOTOOLCHAIN ?= auto
export GOTOOLCHAIN
OUTPUT    := _output
BIN       := $(OUTPUT)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUILDDATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG := github.com/tidal-autoscaler/tidal/internal/version
LDFLAGS   := -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).GitCommit=$(COMMIT) -X $(VERSION_PKG).BuildDate=$(BUILDDATE)

IMAGE     ?= tidal:$(VERSION)
STATICCHECK_VERSION ?= v0.8.2
GOVULNCHECK_VERSION ?= v1.9.0

# The unit tests run with the race detector, which needs cgo and a C
# compiler (make cc installs Debian's gcc when there is none); RACE= runs
# them without it.
RACE      ?= -race
# A race test binary waits a second at exit for late reports; go test has
# failed the test that raced by then, and 40 binaries waiting cost 20 s.
GORACE    ?= atexit_sleep_ms=0
# Tests that skip their heap and allocation bounds under -race (the race
# runtime allocates differently) run once more without it.
NORACE_RUN ?= -run '^(TestResponseBytesLimited|TestBufferedListAllocatesLess|TestHADecoderAllocatesLess)$$' ./adapter/prom ./autoscaler/metrics ./autoscaler/source
# Fuzzing: every FuzzXxx target outside test/ runs for FUZZTIME (make fuzz)
# or FUZZTIME_TEST (make test). A new coverage-finding input is minimized
# for at most FUZZMINIMIZETIME, so short runs keep fuzzing; a failing
# input is written to the package's testdata/fuzz/FuzzXxx/ and becomes a
# test case of every later go test.
FUZZTIME         ?= 10s
FUZZTIME_TEST    ?= 5s
FUZZMINIMIZETIME ?= 2s

# lint, the e2e tests and the unit tests run without -race compile without
# cgo, as the image's binary is built (only -trimpath differs): one
# configuration of the packages then serves go vet, staticcheck, the e2e
# test binaries, the harness's tidal binary and test/image's static one. The
# image's configuration beside the default cost CI a second compile of
# every dependency, about 400 s on 2 cores.
NOCGO     := CGO_ENABLED=0

# Unit tests: everything but the packages that start real servers.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/test/')
# Integration and e2e tests: they start the harness (test/harness).
E2E_PKGS  = $(shell $(GO) list ./test/...)

# Where test/tools/install.sh put the binaries.
TOOLS_DIR := $(OUTPUT)/tools

.PHONY: build
build: ## Build the tidal binary into _output/bin.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/tidal ./cmd/tidal

.PHONY: tools
tools: ## Build (once, cached) etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, helm; install Prometheus.
	test/tools/install.sh

.PHONY: test
test: test-unit test-fuzz test-e2e ## Run every test: unit (with -race), a short fuzz run, integration and e2e.

.PHONY: test-unit
test-unit: cc ## Unit tests (no servers), with the race detector unless RACE= is given.
	$(if $(RACE),CGO_ENABLED=1 GORACE="$(GORACE)" )$(GO) test $(RACE) -count=1 $(UNIT_PKGS)
	$(if $(RACE),$(NOCGO) $(GO) test -count=1 $(NORACE_RUN))

.PHONY: cc
cc: ## A C compiler for -race: Debian's gcc is installed when there is none.
	@if [ -n "$(RACE)" ] && ! command -v "$$($(GO) env CC)" >/dev/null 2>&1; then \
	  echo "cc: no C compiler, which -race needs (cgo); installing Debian's gcc"; \
	  sudo_cmd=""; if [ "$$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi; \
	  $$sudo_cmd apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo_cmd apt-get install -y -qq --no-install-recommends gcc libc6-dev; \
	fi

.PHONY: fuzz
fuzz: ## Run every fuzz target (func FuzzXxx outside test/) for FUZZTIME each (default 10s).
	@targets="$$(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\([A-Za-z_]+ \*testing\.F\)' $$(ls -d */ | grep -vxE '(_output|test)/') \
	  | sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*).*|\1 \2|' | sort)"; \
	if [ -z "$$targets" ]; then echo "fuzz: no fuzz targets found"; exit 1; fi; \
	log="$$(mktemp)"; trap 'rm -f "$$log"' EXIT; \
	n=0; while read -r dir name; do \
	  n=$$((n+1)); echo "fuzz: ./$$dir $$name for $(FUZZTIME)"; \
	  rc=0; $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) "./$$dir" </dev/null 2>&1 | tee "$$log" || rc=$$?; \
	  if [ "$$rc" != "0" ]; then \
	    if [ "$$(grep -A1 -e '^--- FAIL: ' "$$log" | tail -n 1)" = "    context deadline exceeded" ] && ! grep -q 'Failing input written' "$$log"; then \
	      echo "fuzz: $$name stopped at its deadline with Go 1.26's spurious \"context deadline exceeded\" (Go issue 75804, fixed in Go 1.27), no failing input: not a failure"; \
	    else exit 1; fi; \
	  fi; \
	done <<< "$$targets"; \
	echo "fuzz: $$n targets, $(FUZZTIME) each, no failing input"

.PHONY: test-fuzz
test-fuzz: ## make fuzz with FUZZTIME_TEST (default 5s) per target, as make test runs it.
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_TEST)

# E2E_PARALLEL e2e packages run at once, each with its own control plane
# on free loopback ports: most of their time is waiting for sync periods,
# so two at a time fit in CI's budget on 2 cores.
E2E_PARALLEL ?= 2

.PHONY: test-e2e
test-e2e: tools ## Integration and e2e tests against the real harness (E2E_PARALLEL packages at once).
	TIDAL_TOOLS_DIR="$$(readlink -f $(TOOLS_DIR))" $(NOCGO) $(GO) test -count=1 -p $(E2E_PARALLEL) -timeout 25m $(E2E_PKGS)

.PHONY: conformance-random
conformance-random: tools ## Random scenarios against kube-controller-manager's HPA controller (TIDAL_CONFORMANCE_RANDOM=30; the seed is printed, TIDAL_CONFORMANCE_SEED replays).
	TIDAL_TOOLS_DIR="$$(readlink -f $(TOOLS_DIR))" TIDAL_CONFORMANCE_PROFILES=base TIDAL_CONFORMANCE_RANDOM="$${TIDAL_CONFORMANCE_RANDOM:-30}" \
	  $(GO) test -count=1 -timeout 40m -v -run 'TestRandomScenarios' ./test/e2e/conformance

.PHONY: lint
lint: ## gofmt, go vet, staticcheck and (when its database can be reached) govulncheck.
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*'))"; \
	  if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(NOCGO) $(GO) vet ./...
	$(NOCGO) $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@$(MAKE) --no-print-directory vulncheck

# govulncheck needs its vulnerability database. When the database it
# names itself cannot be reached, the same database is built from the
# golang.org/x/vulndb module (its OSV files, through the Go module proxy,
# pinned at VULNDB_VERSION, indexed by its own cmd/indexdb) and govulncheck
# reads that copy. hack/vulnreport prints each finding and fails on a
# vulnerable function of a dependency that this module calls; standard
# library findings fail too, since go.mod's toolchain line selects the Go
# that fixes them (VULNCHECK_STRICT_STDLIB= makes them warnings, for a
# machine held to an older Go).
VULNCHECK_STRICT_STDLIB ?= 1
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018
VULNDB_DIR     := $(OUTPUT)/vulndb/$(VULNDB_VERSION)

.PHONY: vulncheck
vulncheck: ## govulncheck ./... against its online database, or against one built from the golang.org/x/vulndb module.
	@vulncheck="$(GO) run golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)"; \
	db="$$($$vulncheck -version 2>/dev/null | sed -n 's/^DB: *//p')"; \
	code=1; if [ -n "$$db" ] && command -v curl >/dev/null 2>&1; then code=0; curl -fsS -o /dev/null --max-time 10 "$$db/index/db.json.gz" 2>/dev/null || code=$$?; fi; \
	dbflag=""; \
	if [ "$$code" = "0" ]; then echo "vulncheck: govulncheck $(GOVULNCHECK_VERSION) with its online database $$db"; \
	else \
	  echo "vulncheck: the online database cannot be reached from here; using golang.org/x/vulndb $(VULNDB_VERSION) from the module proxy"; \
	  if [ ! -f "$(VULNDB_DIR)/index/db.json" ]; then \
	    src="$$(cd "$$(mktemp -d)" && GOFLAGS=-mod=mod $(GO) mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p')"; \
	    if [ -z "$$src" ] || [ ! -d "$$src/data/osv" ]; then echo "vulncheck: could not download golang.org/x/vulndb $(VULNDB_VERSION)"; exit 1; fi; \
	    rm -rf "$(VULNDB_DIR)" && mkdir -p "$(VULNDB_DIR)" && \
	    (cd "$$(mktemp -d)" && GOFLAGS=-mod=mod $(GO) run golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION) -vulns "$$src/data/osv" -out "$(CURDIR)/$(VULNDB_DIR)") || exit 1; \
	  fi; \
	  dbflag="-db file://$(CURDIR)/$(VULNDB_DIR)"; \
	fi; \
	$$vulncheck $$dbflag -format json ./... | $(GO) run ./hack/vulnreport $(if $(VULNCHECK_STRICT_STDLIB),-strict-stdlib)

.PHONY: bench
bench: tools ## Every performance comparison with its references in one run (docs/performance.md): prints a table, writes _output/bench/<UTC time>/; BENCH_ARGS="-rows pods -rounds 5".
	TIDAL_TOOLS_DIR="$$(readlink -f $(TOOLS_DIR))" $(GO) run ./test/cmd/bench $(BENCH_ARGS)

.PHONY: bench-docs
bench-docs: ## Copy the newest full make bench table into docs/performance.md.
	$(GO) run ./test/cmd/bench -docs-only latest

.PHONY: generate
generate: ## Regenerate deepcopy code and the CRD from autoscaler/apis (controller-gen, pinned).
	hack/update-codegen.sh

.PHONY: sandbox
sandbox: tools ## Run the demo (adapter, autoscaler, demo app, load curve) and write a report to _output/sandbox; SANDBOX_ARGS=--keep keeps it running.
	$(GO) run ./test/cmd/sandbox $(SANDBOX_ARGS)

# make image builds the image without a container engine and without a base
# image (hack/image, internal/ociimage): a static tidal binary per platform
# in IMAGE_PLATFORMS and the CA bundle IMAGE_CA_BUNDLE, written to
# $(IMAGE_DIR)/oci (an OCI layout holding the multi-platform index) and
# $(IMAGE_DIR)/tidal-<version>-<arch>.tar (docker load, tagged $(IMAGE)).
# Every timestamp is SOURCE_DATE_EPOCH, the commit's time, and so is the
# binary's BuildDate: the same commit and Go toolchain give the same digests.
IMAGE_PLATFORMS   ?= linux/amd64 linux/arm64
IMAGE_CA_BUNDLE   ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_DIR         := $(OUTPUT)/image
IMAGE_REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_BUILDDATE   = $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r $(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
IMAGE_LDFLAGS     = -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).GitCommit=$(COMMIT) -X $(VERSION_PKG).BuildDate=$(IMAGE_BUILDDATE)

.PHONY: image
image: image-ca ## Build the OCI image, no Docker engine needed: _output/image/oci (IMAGE_PLATFORMS) and a docker load tarball per platform.
	@set -e; bins=""; for p in $(IMAGE_PLATFORMS); do \
	  os="$${p%%/*}"; arch="$${p#*/}"; out="$(IMAGE_DIR)/bin/$${os}_$${arch}/tidal"; \
	  echo "image: go build $$p"; \
	  CGO_ENABLED=0 GOOS="$$os" GOARCH="$$arch" $(GO) build -trimpath -ldflags "$(IMAGE_LDFLAGS)" -o "$$out" ./cmd/tidal; \
	  bins="$$bins -binary $$p=$$out"; \
	done; \
	$(GO) run ./hack/image -out $(IMAGE_DIR) -ca $(IMAGE_CA_BUNDLE) -tag $(IMAGE) \
	  -version $(VERSION) -revision $(IMAGE_REVISION) -created $(SOURCE_DATE_EPOCH) $$bins

.PHONY: image-ca
image-ca: ## The image's CA bundle: Debian's ca-certificates is installed when IMAGE_CA_BUNDLE is missing.
	@if [ ! -s "$(IMAGE_CA_BUNDLE)" ]; then \
	  if [ "$(IMAGE_CA_BUNDLE)" = /etc/ssl/certs/ca-certificates.crt ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "image-ca: no $(IMAGE_CA_BUNDLE); installing Debian's ca-certificates"; \
	    sudo_cmd=""; if [ "$$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi; \
	    $$sudo_cmd apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$sudo_cmd apt-get install -y -qq --no-install-recommends ca-certificates; \
	  fi; \
	  if [ ! -s "$(IMAGE_CA_BUNDLE)" ]; then \
	    echo "image-ca: no CA bundle at $(IMAGE_CA_BUNDLE): install Debian's ca-certificates package or set IMAGE_CA_BUNDLE to a PEM bundle"; exit 1; \
	  fi; \
	fi

# make chart-version, at a release: the chart's appVersion (its default
# image tag) becomes VERSION, the tag make image writes, and its version the
# same without the v. CHART_DIR points it at a copy (test/manifests does).
CHART_DIR ?= manifests/charts/tidal

.PHONY: chart-version
chart-version: ## Set the chart's appVersion to VERSION (git describe, e.g. v0.2.0) and its version to VERSION without the v.
	@if ! printf '%s' "$(VERSION)" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$'; then \
	  echo "chart-version: VERSION=$(VERSION) is not a release version (vX.Y.Z, optionally -suffix): tag the commit (git tag v0.2.0) or set VERSION=v0.2.0"; exit 1; \
	fi
	@sed -e 's/^version: .*/version: $(patsubst v%,%,$(VERSION))/' -e 's/^appVersion: .*/appVersion: "$(VERSION)"/' \
	  $(CHART_DIR)/Chart.yaml > $(CHART_DIR)/Chart.yaml.tmp && mv $(CHART_DIR)/Chart.yaml.tmp $(CHART_DIR)/Chart.yaml
	@grep -E '^(version|appVersion):' $(CHART_DIR)/Chart.yaml

.PHONY: docker-image
docker-image: ## Build the image with a Docker engine from the Dockerfile, tagged IMAGE.
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

.PHONY: clean
clean: ## Remove build output (the tools cache in ~/.cache/tidal stays).
	rm -rf $(OUTPUT)

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'
