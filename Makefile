# The public interface of the repository: build, demo, test, bench.
# `make demo` and `make test` install what they need (packaging/prereq.sh).

comma := ,
empty :=
space := $(empty) $(empty)
# RELEASE_PUBKEYS: base64 Ed25519 release keys every binary trusts (docs/releases.md).
RELEASE_PUBKEYS ?=
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
LDFLAGS := -s -w -X github.com/ployz/ployz/internal/version.Version=$(VERSION) -X github.com/ployz/ployz/core/release.trustedKeys=$(subst $(space),$(comma),$(strip $(RELEASE_PUBKEYS)))
PLUGINS := $(notdir $(patsubst %/,%,$(filter-out plugins/internal/,$(wildcard plugins/*/))))
BIN     := $(CURDIR)/bin
GO      ?= go
export CGO_ENABLED := 0

.PHONY: build demo test lint depaware-update vm-image unit race release-module cross lab-test vm-step vm-test vm-lab-test record-zfs-session bench fuzz fuzz-short cover proto prereq clean release

# DEV_RELEASE_KEY: the release key a development build (`make build`)
# trusts besides RELEASE_PUBKEYS, made by the first build and kept in the
# build's bin/, never in the repository. The lab signs the bundles it
# builds with it, so --bundle is checked there as in a release
# (docs/releases.md, "Development builds"). `make release` never trusts it.
DEV_RELEASE_KEY ?= $(BIN)/dev-release.key
BUILD_TRUST = $(subst $(space),$(comma),$(strip $(RELEASE_PUBKEYS) $(shell cat $(DEV_RELEASE_KEY).pub)))
BUILD_LDFLAGS = $(LDFLAGS) -X github.com/ployz/ployz/core/release.trustedKeys=$(BUILD_TRUST)

$(DEV_RELEASE_KEY).pub:
	@mkdir -p $(dir $@)
	if [ -f $(DEV_RELEASE_KEY) ]; then $(GO) run ./internal/releasekey pub $(DEV_RELEASE_KEY); \
	else $(GO) run ./internal/releasekey gen $(DEV_RELEASE_KEY); fi > $@.tmp && mv $@.tmp $@

## build: static binaries into ./bin (ployz, ployzd, ployz-lab, one per plugin, testapp)
build: $(DEV_RELEASE_KEY).pub
	$(GO) build -trimpath -ldflags '$(BUILD_LDFLAGS)' -o $(BIN)/ ./cmd/ployz ./cmd/ployzd ./cmd/ployz-lab
	@for p in $(PLUGINS); do \
	  $(GO) build -trimpath -ldflags '$(BUILD_LDFLAGS)' -o $(BIN)/ployz-$$p ./plugins/$$p || exit 1; \
	done
	$(GO) build -trimpath -ldflags '$(BUILD_LDFLAGS)' -o $(BIN)/testapp ./e2e/testapp
	$(GO) build -trimpath -ldflags '$(BUILD_LDFLAGS)' -o $(BIN)/ployz-example ./sdk/example

prereq:
	@packaging/prereq.sh

## release: one version into the release source dist/ (docs/releases.md):
## dist/v<major>/<version>/ holds per linux arch a bundle and a .deb, the
## CLI for linux/darwin x amd64/arm64, install.sh, SHA256SUMS and the index
## release.json with its Ed25519 signature, and each bundle's own signature
## <bundle>.sig (for a bundle copied out of dist/); dist/v<major>/<CHANNEL> points
## at the version. Other versions in dist/ stay (a source keeps its history).
## Signs with RELEASE_KEY=FILE or $$PLOYZ_RELEASE_KEY; the binaries it builds
## trust that key's public half and RELEASE_PUBKEYS.
RELEASE_ARCHES ?= amd64 arm64
CLI_TARGETS    ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
DIST           ?= $(CURDIR)/dist
CHANNEL        ?= edge
RELEASE_KEY    ?=
RELEASE_DEB    ?= true
RELEASE_DOCS   ?= true
# RELEASE_TRUST is evaluated only by `make release` (it runs go).
RELEASE_TRUST = $(subst $(space),$(comma),$(strip $(RELEASE_PUBKEYS) $(shell $(GO) run ./internal/releasekey pub $(RELEASE_KEY))))
RELEASE_LDFLAGS = $(LDFLAGS) -X github.com/ployz/ployz/core/release.trustedKeys=$(RELEASE_TRUST)
# One go build per arch links ployzd and the plugins in parallel (built one
# by one, a release took 1m17s-1m37s on the 2-core host, mostly linking);
# go build names a plugin's binary after its directory, hence the mv.
release:
	@test -n "$(RELEASE_TRUST)" || { echo "release: no signing key: RELEASE_KEY=FILE or PLOYZ_RELEASE_KEY (go run ./internal/releasekey gen FILE)"; exit 1; }
	@case ",$(RELEASE_TRUST)," in *",$$(cat $(DEV_RELEASE_KEY).pub 2>/dev/null),"*) \
	  echo "release: $(DEV_RELEASE_KEY) is the development builds' key (its private half sits in bin/): sign releases with a key of their own"; exit 1;; esac
	rm -rf $(DIST)/.build && mkdir -p $(DIST)/.build
	@for a in $(RELEASE_ARCHES); do \
	  echo "== linux/$$a: ployzd and plugins"; \
	  GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags '$(RELEASE_LDFLAGS)' -o $(DIST)/.build/linux-$$a/ ./cmd/ployzd $(addprefix ./plugins/,$(PLUGINS)) || exit 1; \
	  for p in $(PLUGINS); do mv $(DIST)/.build/linux-$$a/$$p $(DIST)/.build/linux-$$a/ployz-$$p || exit 1; done; \
	done
	@for t in $(CLI_TARGETS); do \
	  echo "== CLI $$t"; \
	  GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build -trimpath -ldflags '$(RELEASE_LDFLAGS)' -o $(DIST)/.build/cli-$${t%/*}-$${t#*/}/ployz ./cmd/ployz || exit 1; \
	done
	cd packaging/release && $(GO) run . -version '$(VERSION)' -dist $(DIST) -build $(DIST)/.build -units ../systemd \
	  -arch '$(subst $(space),$(comma),$(RELEASE_ARCHES))' -cli '$(subst $(space),$(comma),$(CLI_TARGETS))' \
	  -deb=$(RELEASE_DEB) -key '$(RELEASE_KEY)' -channel '$(CHANNEL)' -script ../install.sh
	if [ '$(RELEASE_DOCS)' = true ]; then $(GO) run ./cmd/ployz gendocs --out $(DIST)/docs; fi
	rm -rf $(DIST)/.build
	@ls -la $(DIST) $(DIST)/v*

## demo: the main job — a 3-Machine lab on this host, printed with its addresses
demo: prereq build
	packaging/demo.sh

## test: everything — unit tests first (with the race detector), then the
## VM scenarios (packaging/vm-test-step.sh) beside lint, a short fuzz pass
## and the light container lab scenarios, then the heavy lab scenarios
## alone
# test runs the stages through packaging/test-stages.sh, which prints each
# stage's time at the end; vm-image starts the VM image build in the
# background so it is ready when vm-step needs it. lint runs in the VM
# step's window, which had ~7 minutes to spare (CI's budget is tightest on
# the unit stage's side: a fresh machine compiles everything there).
test:
	@packaging/test-stages.sh prereq build vm-image unit lab-images '&vm-step' lint fuzz-short lab-light wait lab-heavy

# TEST_START is when make test started (test-stages.sh passes it): the VM
# step runs in what is left of make test's 75 minutes.
TEST_START ?= $(shell date +%s)
vm-step:
	@packaging/vm-test-step.sh $(TEST_START) $(BIN)

vm-image:
	@packaging/vm-image-start.sh $(BIN)

# unit runs the store's replication tests once more with the gossip and
# sync timers a Machine uses instead of the short test ones (about 45s).
STORE_PROD_TESTS := TestReplication|TestConvergence|TestPowerLoss|TestGossipRefusesNonMembers|TestAdminSocketMembership|TestPartitionMarksDown

unit: cross
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	STORE_TEST_PRODUCTION_TIMERS=1 $(GO) test -count=1 -run '$(STORE_PROD_TESTS)' ./core/store/server/ ./core/store/gossip/
	@$(MAKE) --no-print-directory race release-module

# race: the race detector over the packages where goroutines share state.
# It needs cgo (gcc, libc6-dev: packaging/prereq.sh installs them); the
# binaries stay static (CGO_ENABLED=0 everywhere else). -short scales the
# store's convergence runs down (the 7-Machine one alone outlasts 10
# minutes under -race). Measured on this 2-core host, shared (load 15):
# 5m06s wall, 2m40s CPU with the race build cache warm; core/store/server
# is the longest package (3 min, mostly its timers). A cold cache adds the
# race build of the dependencies.
RACE_PKGS := ./core/store/... ./core/rpc/... ./core/deploy/... ./core/pluginhost/... ./core/daemon/... ./sdk/...
race:
	CGO_ENABLED=1 $(GO) test -race -short -count=1 $(RACE_PKGS)

# release-module: packaging/release is a module of its own (`make release`
# runs it), which ./... does not reach. Measured: 2m38s wall at load 15,
# almost all of it building the module (it has no tests yet).
release-module:
	cd packaging/release && $(GO) build ./... && $(GO) vet ./... && $(GO) test -count=1 ./...

## cross: the CLI builds for the operator's computer (macOS, Linux arm64)
CROSS := darwin/arm64 darwin/amd64 linux/arm64
cross:
	@for t in $(CROSS); do \
	  echo "GOOS=$${t%/*} GOARCH=$${t#*/} go build ./cmd/ployz"; \
	  GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build -o /dev/null ./cmd/ployz || exit 1; \
	done

# Release N-1 for TestUpgradeFromPrevious (upgrade from it, and a mixed
# Cluster of N and N-1): the newest release tag (v*) before HEAD, else the
# last shipped release committed in packaging/previous-release, else the
# previous commit; empty in a clone without history, and the test fails
# under CI (skips otherwise). packaging/upgrade-from.sh says how.
UPGRADE_FROM ?= $(shell packaging/upgrade-from.sh)

LAB_ENV = PLOYZ_LAB=1 PLOYZ_BIN_DIR=$(BIN) PLOYZ_UPGRADE_FROM=$(UPGRADE_FROM)
lab-test:
	$(LAB_ENV) $(GO) test -count=1 -timeout 48m -v ./e2e/

# make test splits lab-test in two: the light scenarios (needLightLab:
# they hold on a loaded host, two at a time) run beside the VM scenarios
# (lab-light), the ones that count failed requests or time a failover
# alone (lab-heavy). lab-images builds the lab's images first (e2e's
# TestMain, no scenario), so the runs at once never build one together.
LAB_LIGHT = $(shell packaging/lab-light-tests.sh)
lab-images:
	$(LAB_ENV) $(GO) test -count=1 -run '^$$' ./e2e/
lab-heavy:
	$(LAB_ENV) $(GO) test -count=1 -timeout 40m -v -skip '$(LAB_LIGHT)' ./e2e/
lab-light:
	$(LAB_ENV) $(GO) test -count=1 -timeout 30m -v -run '$(LAB_LIGHT)' ./e2e/

## vm-test: every scenario on QEMU virtual-machine Machines (own kernel:
## kernel WireGuard, ZFS); the first run builds the VM image (zfs-dkms).
## vm-lab-test runs only TestVMLab (kernel WireGuard, Containers across
## Machines under Docker's FORWARD DROP, ZFS pool, partition, power cycle).
vm-test: build
	@PLOYZ_PREREQ_VM=1 packaging/prereq.sh
	PLOYZ_LAB=1 PLOYZ_LAB_VM=1 PLOYZ_BIN_DIR=$(BIN) $(GO) test -count=1 -timeout 60m -v -run '^TestVM' ./e2e/

vm-lab-test: build
	@PLOYZ_PREREQ_VM=1 packaging/prereq.sh
	PLOYZ_LAB=1 PLOYZ_LAB_VM=1 PLOYZ_BIN_DIR=$(BIN) $(GO) test -count=1 -timeout 60m -v -run '^TestVMLab$$' ./e2e/

## record-zfs-session: re-record the zfs/zpool session volume-zfs's unit
## test replays, on a 1-Machine VM lab (packaging/record-zfs-session.sh);
## after changing which zfs commands its Manager runs.
record-zfs-session: build
	@PLOYZ_PREREQ_VM=1 packaging/prereq.sh
	PLOYZ_BIN_DIR=$(BIN) packaging/record-zfs-session.sh

## bench: benchmarks; they print ratios and never gate CI. Their output
## (bin/bench.txt) rewrites the <!-- bench:Name --> blocks of docs/benchmarks.md.
# -timeout: the store's scale harness (docs/scale.md) runs up to 100 nodes
# in one test binary, past go test's default 10 minutes.
BENCH_OUT := $(BIN)/bench.txt
bench: prereq build
	bash -o pipefail -c "$(GO) test -run '^$$' -bench . -timeout 60m $$($(GO) list ./... | grep -v /e2e) | tee $(BENCH_OUT)"
	bash -o pipefail -c "PLOYZ_LAB=1 PLOYZ_BIN_DIR=$(BIN) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./e2e/ | tee -a $(BENCH_OUT)"
	$(GO) run ./internal/benchdoc/run -doc docs/benchmarks.md -command 'make bench' < $(BENCH_OUT)

## fuzz: every fuzz target for FUZZTIME each (default 60s). `make test`
## runs their seeds; an input that fails here is written to the package's
## testdata/fuzz/<target>/ and becomes a seed once the bug is fixed.
FUZZTIME ?= 60s
# Every target runs even after one fails; the failures are listed at the end.
fuzz:
	@failed=""; n=0; \
	for d in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$d/*_test.go); do \
	    n=$$((n+1)); echo "== $$d $$f ($(FUZZTIME))"; \
	    GO=$(GO) packaging/fuzz-target.sh $$d $$f $(FUZZTIME) || failed="$$failed $$d:$$f"; \
	  done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: FAILED:$$failed"; exit 1; fi; \
	echo "fuzz: all $$n targets ran $(FUZZTIME) with no failure"

## fuzz-short: the nine targets decoding what reaches a Machine from
## outside it, FUZZ_SHORT_TIME each (make test). One package per go test
## -fuzz. A failure writes the input to the package's testdata/fuzz/<target>/,
## where it stays as a seed once the bug is fixed. -fuzzminimizetime 10x:
## minimizing each new input for the default 60 s ate the 15 s of the tar
## targets (6 executions in 15 s; 2000-27000 with it). Measured on this
## 2-core host, shared (load 10-17): 3m57s wall with the instrumented
## builds cached (2 min of it fuzzing); 14 min on the first, cold run at
## load 20 (9m20s CPU: each package builds once more with coverage).
## FuzzVolumeStream (the frames of a volume stream between Machines)
## came after: 15 s more, its package already built for FuzzCall.
FUZZ_SHORT_TIME ?= 15s
FUZZ_SHORT := \
	./core/store/server:FuzzPeerEnvelope \
	./core/rpc:FuzzCall \
	./core/rpc:FuzzDecodePayload \
	./core/rpc:FuzzVolumeStream \
	./plugins/dns/internal/dns:FuzzWire \
	./core/store/server:FuzzStatement \
	./core/release:FuzzExtract \
	./core/images:FuzzFanTar \
	./core/daemon/feature/containers:FuzzUntar
fuzz-short:
	@failed=""; \
	for t in $(FUZZ_SHORT); do \
	  echo "== $${t%%:*} $${t#*:} ($(FUZZ_SHORT_TIME))"; \
	  GO=$(GO) packaging/fuzz-target.sh $${t%%:*} $${t#*:} $(FUZZ_SHORT_TIME) -fuzzminimizetime 10x || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz-short: FAILED:$$failed"; exit 1; fi

## cover: per-package coverage of the unit tests, then the coverage of the
## plugin processes the plugin tests start (built with -cover, writing to
## GOCOVERDIR: `go test -cover` would keep that for itself, hence two passes).
COVERDIR ?= $(CURDIR)/.cover
PLUGIN_TESTS := ./core/pluginhost/... ./sdk/... ./plugins/...
cover:
	rm -rf $(COVERDIR) && mkdir -p $(COVERDIR)/procs
	$(GO) test -count=1 -cover ./... | tee $(COVERDIR)/unit.txt
	@echo "== plugin processes started by the tests"
	PLOYZ_COVER_PLUGINS=1 GOCOVERDIR=$(COVERDIR)/procs $(GO) test -count=1 $(PLUGIN_TESTS) >/dev/null
	$(GO) tool covdata percent -i=$(COVERDIR)/procs | tee $(COVERDIR)/procs.txt

## proto: regenerate the gRPC code of the plugin SDK and of Machine RPC
proto:
	GO=$(GO) packaging/proto.sh

## lint: staticcheck (checks in staticcheck.conf) and the generated
## protobuf code current (packaging/proto.sh --check); docs/contributing.md.
# make test runs it beside the VM step (&vm-step lint ...).
# A cold run (empty staticcheck cache: it type-checks every dependency from
# source; the Go build cache warm) took 2m25s wall, 2m15s CPU and 1.2 GB
# at load 5 on the 2-core host (5m16s CPU on a first run at load 12); a
# warm one 6 s, the protobuf check included.
lint:
	$(GO) tool staticcheck ./...
	GO=$(GO) packaging/proto.sh --check

## depaware-update: rewrite the committed lists of the packages each
## shipped binary links (<main package>/depaware.txt), after a change
## to what one links; TestDepaware (make unit) fails while one is stale.
depaware-update:
	PLOYZ_DEPAWARE_UPDATE=1 $(GO) test -count=1 -run '^TestDepaware$$' .

clean:
	rm -rf $(BIN)
