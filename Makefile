# waitdaemon: `make demo` runs the double fork on a local engine, `make
# test` the gate, `make test-all` the whole matrix. Each starts a Docker
# engine if none answers (scripts/engine.sh).

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE   ?= waitdaemon:dev
PROBE_IMAGE ?= waitdaemon-probe:dev
ARCHES  ?= amd64 arm64
HOSTARCH := $(shell go env GOARCH)
# Where the binaries and the image's context go: the VM suite builds its
# image in a directory of its own, beside the end-to-end tests' bin/.
BIN     ?= bin

# A static, stripped binary, and -l (no inlining) trims it: the image must
# stay small enough for an in-memory OS. It keeps net/http's HTTP/2 client
# (no nethttpomithttp2 tag): containerdapi speaks gRPC over it, unencrypted,
# and without it every containerd call fails. That costs about 340 KB.
# The purego tag swaps the crypto packages' assembly (which net/http links
# for TLS, never used on an engine's socket) for their Go code: 164 KB
# less on amd64, 64 KB on arm64.
GOBUILD = CGO_ENABLED=0 GOOS=linux go build -trimpath -tags purego \
	-gcflags=all=-l -ldflags "-s -w -X main.version=$(VERSION)"

.PHONY: tink-agents build test test-all sweep soak field image probe-image demo bench bench-short record fuzz mutate engine docker29 docker28 docker26 clean oci push containerd record-containerd

build: $(foreach a,$(ARCHES),$(BIN)/waitdaemon-linux-$(a))

$(BIN)/waitdaemon-linux-%: FORCE
	GOARCH=$* $(GOBUILD) -o $@ .

FORCE:

# Two tiers (docs/development.md#the-two-tiers, scripts/test.sh).
# make test, the gate: go vet, every package's tests with -race and
# -short (the end-to-end tests on Docker 20.10 and containerd 2.2.1, a
# sample of the fault sweep, no soak), the bench once per measure (make
# bench-short, with the images it needs), then the VM suite's two gate
# rows (the README's reboot on CaptainOS, and on HookOS with Debian's
# Docker 26.1): no Docker is built from source.
test: engine containerd image probe-image
	scripts/test.sh gate

# make test-all, the whole matrix: every row of the engine table (Docker
# 29, 28.2 and 26.1 built into /var/cache/waitdaemon the first time),
# the whole sweep, the soak and every VM row. PART runs one part of it:
# unit, e2e, e2e-ROW (docker, docker29, docker28, docker26, podman,
# containerd), sweep, soak or field; `make sweep` and `make soak` too.
PART ?=
ALL_DOCKERS = docker29 docker28 docker26
PART_DOCKERS = $(if $(filter unit sweep e2e-docker e2e-podman e2e-containerd,$(PART)),,$(if $(filter e2e-docker%,$(PART)),$(patsubst e2e-%,%,$(PART)),$(if $(filter field,$(PART)),docker28,$(ALL_DOCKERS))))
test-all: engine containerd $(PART_DOCKERS)
	scripts/test.sh all $(PART)

sweep soak:
	@$(MAKE) --no-print-directory test-all PART=$@

# The VM suite (field/): the CaptainOS-like machine and the HookOS-like
# ones (Docker 28.2, and Debian's 26.1 for the README's HookOS
# templates), built from Debian trixie into /var/cache/waitdaemon/field
# the first time (a minute or two each; later runs find them there), boot
# in QEMU two at a time (FIELD_PARALLEL, each takes a core under TCG);
# every template of the README and docs/templates.md runs on each OS it is
# for, and a table says how each machine went down. FIELD_RUN (a regexp of
# os/scenario) and FIELD_OS (captainos, hookos, hookos26) narrow it;
# FIELD_FLAGS=-short runs make test's rows alone. Its tools, Debian's
# QEMU, mmdebstrap and the rest, are installed if missing
# (scripts/field-deps.sh).
FIELD_FLAGS ?=
field: engine containerd
	@scripts/field-deps.sh
	go test -count=1 $(FIELD_FLAGS) -timeout 75m -v ./field/

image: $(BIN)/waitdaemon-linux-$(HOSTARCH)
	cp $(BIN)/waitdaemon-linux-$(HOSTARCH) $(BIN)/waitdaemon
	DOCKER_BUILDKIT=0 docker build -q -f Dockerfile.scratch -t $(IMAGE) $(BIN)

# The release: an OCI layout in $(OCI_DIR) whose index holds an image of
# Dockerfile.scratch per architecture, every timestamp the commit's, so
# the same commit gives the same index digest (tools/oci). `make push
# IMAGE=registry/waitdaemon:tag` copies the whole index and prints the
# reference to pin, by digest.
OCI_DIR ?= bin/oci
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_URL ?= https://github.com/waitdaemon/waitdaemon
PUSH_FLAGS ?=

oci: build
	rm -rf $(OCI_DIR) $(OCI_DIR).pushed
	go run ./tools/oci -out $(OCI_DIR) -dockerfile Dockerfile.scratch -created "$(SOURCE_DATE_EPOCH)" \
		-source $(SOURCE_URL) -version $(VERSION) -revision "$(REVISION)" \
		$(foreach a,$(ARCHES),-binary linux/$(a)=bin/waitdaemon-linux-$(a))

ifneq ($(filter push,$(MAKECMDGOALS)),)
ifeq ($(origin IMAGE),file)
$(error make push: name the image, like IMAGE=registry.example:5000/waitdaemon:v1)
endif
endif

push: oci
	@command -v skopeo >/dev/null || { echo "make push needs skopeo: apt-get install -y skopeo" >&2; exit 1; }
	skopeo copy --all --preserve-digests --digestfile $(OCI_DIR).pushed $(PUSH_FLAGS) oci:$(OCI_DIR) docker://$(IMAGE)
	@ref=$(IMAGE); case "$${ref##*/}" in *:*) ref=$${ref%:*};; esac; echo "pushed: $$ref@$$(cat $(OCI_DIR).pushed)"

# The end-to-end tests' and the demo's user image: it records what it got.
probe-image:
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/probe/probe ./tools/probe
	cp tools/probe/Dockerfile bin/probe/
	DOCKER_BUILDKIT=0 docker build -q -t $(PROBE_IMAGE) bin/probe

# On Docker 20.10, then on Docker 29, 28.2 and 26.1, on Podman 4.3 (a
# service of its own, scripts/podman.sh) and on the test containerd
# (actions made as tink-agent makes them, in its namespace), with the
# same images, actions run and removed as each engine's worker does: one
# table, each engine's figures against docs/footprint.md's targets, and
# docs/timeline.svg. Each engine has a run that waits
# out the 60 s bound (docs/development.md#how-long-each-takes has each
# step's time). bench-short, part of make test: one run of each
# measure on make test's two engines, Docker 20.10 and containerd; it
# fails when a measure cannot be taken, never on a figure.
DOCKER_SOCKETS = /run/docker29/docker.sock /run/docker28/docker.sock /run/docker26/docker.sock
CONTAINERD_SOCKET = /run/containerd-test/containerd.sock
ENGINES_CACHE ?= /var/cache/waitdaemon
CTR = $(ENGINES_CACHE)/containerd-v2.2.1/ctr
BENCH = go run ./tools/bench -image $(IMAGE) -probe $(PROBE_IMAGE)

bench: engine docker29 docker28 docker26 containerd build image probe-image
	for sock in $(DOCKER_SOCKETS); do \
		docker save $(IMAGE) $(PROBE_IMAGE) | docker -H unix://$$sock load -q || exit 1; \
	done
	docker save $(IMAGE) $(PROBE_IMAGE) | $(CTR) -a $(CONTAINERD_SOCKET) -n tinkerbell images import - >/dev/null
	sock=$$(scripts/podman.sh) && docker save $(IMAGE) $(PROBE_IMAGE) | CONTAINERS_CONF=/run/waitdaemon-podman/containers.conf podman load -q >/dev/null && \
		$(BENCH) -docker /var/run/docker.sock,$$(echo $(DOCKER_SOCKETS) | tr ' ' ,),$$sock -containerd $(CONTAINERD_SOCKET); \
		status=$$?; scripts/podman.sh stop; exit $$status

bench-short: engine containerd image probe-image
	docker save $(IMAGE) $(PROBE_IMAGE) | $(CTR) -a $(CONTAINERD_SOCKET) -n tinkerbell images import - >/dev/null
	$(BENCH) -short -docker /var/run/docker.sock -containerd $(CONTAINERD_SOCKET)

# ENGINE=containerd runs it on the test containerd instead.
ENGINE ?= docker
demo: engine image probe-image $(if $(filter containerd,$(ENGINE)),containerd)
	IMAGE=$(IMAGE) PROBE_IMAGE=$(PROBE_IMAGE) ENGINE=$(ENGINE) scripts/demo.sh

engine:
	@scripts/engine.sh

# A real Docker 29, 28.2 (HookOS v0.11's) or 26.1 (HookOS v0.9's line)
# beside 20.10, each on a socket of its own, /run/dockerNN/docker.sock
# (built and cached under /var/cache/waitdaemon the first time;
# docs/development.md#how-long-each-takes says how long).
docker29 docker28 docker26:
	@scripts/docker.sh $(subst docker,,$@)

record: engine docker29 docker28 docker26
	testdata/record.sh

# A test containerd 2.2.1 on /run/containerd-test/containerd.sock (built
# once into /var/cache/waitdaemon), beside Docker; `scripts/containerd.sh
# stop` stops it.
containerd:
	@scripts/containerd.sh

# Tinkerbell's released tink-agent, v0.23.0, v0.24.0 and v0.25.0, and
# each release's own server side (tools/tinkerbell, built inside the
# release's module copy), built from the Go module proxy into
# /var/cache/waitdaemon/tinkerbell-VERSION the first time: make
# test-all's comparison of
# the runner with the real agent (e2e, TestRealAgent) and the VM suite's
# rows run them; and v0.25.0's whole control plane (cmd/tinkerbell
# -tags embedded), which the VM suite's control-plane
# rows run.
tink-agents:
	@EMBEDDED=1 scripts/tinkerbell.sh >/dev/null

record-containerd: engine containerd
	testdata/record-containerd.sh

fuzz:
	go test ./phase/ -run=NONE -fuzz=FuzzWaitSeconds -fuzztime=30s
	go test ./imageref/ -run=NONE -fuzz=FuzzParse -fuzztime=30s
	go test ./dockerapi/ -run=NONE -fuzz=FuzzDecodePull -fuzztime=30s
	go test ./dockerapi/ -run=NONE -fuzz=FuzzTraceStream -fuzztime=30s
	go test ./dockerapi/ -run=NONE -fuzz=FuzzTraceAnyBody -fuzztime=30s
	go test ./selfid/ -run=NONE -fuzz=FuzzCandidates -fuzztime=30s
	go test ./engine/docker/hostconfig/ -run=NONE -fuzz=FuzzPlan -fuzztime=30s

# Mutation testing with gremlins (pinned in tools/mutate, a module of its
# own): each package with unit tests, by its unit tests alone (never e2e),
# then a table of killed, lived, not covered and timed-out mutants, the
# efficacy raw and with docs/mutants.md's equivalents counted as killed,
# and the coverage (docs/mutants.md). -count=1: gremlins
# times the package's tests once, uncached, and gives each mutant
# MUTATE_TIMEOUT times that; a cached run would time out every mutant
# whose build takes longer. A mutant that never ends (a loop's counter
# turned) waits that long, so the coefficient stays small (a timed-out
# mutant counts in no efficacy).
# A package is one directory: -E / leaves out the files of the directories
# under it, which are packages of their own (engine's engine/docker, ...).
# The binary's packages with unit tests, all but main: gremlins would take
# the coverage of the root by ./..., e2e and field with it.
MUTATE_PKGS ?= phase inherit engine/docker/hostconfig engine/containerd/ocispec selfid imageref dockerapi engine engine/containerd engine/docker containerdapi internal/socketclient internal/redact internal/tarfile
MUTATE_WORKERS ?= 2
MUTATE_TIMEOUT ?= 12
MUTATE_DIR = bin/mutate

mutate: bin/gremlins bin/mutate-table
	@mkdir -p $(MUTATE_DIR)
	@for p in $(MUTATE_PKGS); do \
		echo "== $$p"; \
		GOFLAGS="$$(go env GOFLAGS) -count=1" bin/gremlins unleash --output-statuses lt --workers $(MUTATE_WORKERS) --timeout-coefficient $(MUTATE_TIMEOUT) -E / \
			--output $(MUTATE_DIR)/$$(echo $$p | tr / _).json ./$$p || exit 1; \
	done
	@bin/mutate-table -equivalents docs/mutants.md $(foreach p,$(MUTATE_PKGS),$(p)=$(MUTATE_DIR)/$(subst /,_,$(p)).json)

bin/gremlins: tools/mutate/go.mod tools/mutate/go.sum
	go build -C tools/mutate -o ../../bin/gremlins github.com/go-gremlins/gremlins/cmd/gremlins

bin/mutate-table: tools/mutate/table/main.go tools/mutate/go.mod
	go build -C tools/mutate -o ../../bin/mutate-table ./table

clean:
	rm -rf bin
