# flowhost: the two commands of the README are `make demo` and `make test`.
# Both install what they need on a fresh Debian machine with Go 1.26.

SHELL := /bin/bash
GO ?= go
# Debian packages the tests and the demo need: gcc for cgo (the wasmtime
# engine), wat2wasm for the WAT guests,
# clang/lld/wasi-libc for the C SDK, Debian's rustc/cargo with the wasm32
# standard library and serde_cbor for the Rust SDK, node/npm for the
# AssemblyScript SDK, chromium for the operator page's browser test.
APT_PACKAGES := gcc wabt clang lld wasi-libc libclang-rt-dev-wasm32 libc++-dev-wasm32 libclang-rt-dev \
	rustc cargo libstd-rust-dev-wasm32 \
	librust-serde-cbor-dev librust-serde-dev librust-serde-derive-dev chromium
# Node.js (with npm) comes from Debian only when the machine has none: a
# machine with NodeSource's nodejs already has npm, and Debian's npm
# package conflicts with it.
NODE_PACKAGES := nodejs npm
# Each fuzz target runs this long in make test, on top of its seed corpus
# (63 targets: at 10 s the loop took half of CI's 30 minutes). For a deeper
# search of one package: make fuzz FUZZTIME=5m, or go test -fuzz.
FUZZTIME ?= 6s

.PHONY: all demo test deps build vet unit fuzz bench bench-all

all: build

# deps installs what a fresh machine lacks and fails loudly if it cannot.
deps:
	@command -v $(GO) >/dev/null || { echo "Go 1.26 is required: https://go.dev/doc/install"; exit 1; }
	@missing=""; \
	for t in gcc wat2wasm clang wasm-ld /usr/bin/cargo /usr/bin/rustc chromium; do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	[ -d /usr/include/wasm32-wasi ] || missing="$$missing wasi-libc"; \
	command -v clang >/dev/null && [ -f "$$(clang --target=wasm32-wasi -print-libgcc-file-name)" ] || missing="$$missing libclang-rt-dev-wasm32"; \
	[ -f /usr/lib/wasm32-wasi/libc++.a ] || missing="$$missing libc++-dev-wasm32"; \
	command -v clang >/dev/null && [ -f "$$(clang -print-file-name=libclang_rt.asan-x86_64.a)" ] || missing="$$missing libclang-rt-dev"; \
	ls -d /usr/lib/rustlib/wasm32-* >/dev/null 2>&1 || missing="$$missing libstd-rust-dev-wasm32"; \
	[ -d /usr/share/cargo/registry ] && ls /usr/share/cargo/registry | grep -q '^serde_cbor-' || missing="$$missing librust-serde-cbor-dev"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages for:$$missing"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && $$SUDO apt-get install -y $(APT_PACKAGES) \
			|| { echo "could not install: $(APT_PACKAGES); install them and retry"; exit 1; }; \
	fi
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "installing Node.js and npm from Debian"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && $$SUDO apt-get install -y $(NODE_PACKAGES) \
			|| { echo "could not install $(NODE_PACKAGES); install Node.js >= 18 with npm and retry"; exit 1; }; \
	fi
	$(GO) mod download
	@if [ -f sdk/assemblyscript/package-lock.json ] && [ ! -d sdk/assemblyscript/node_modules ]; then \
		echo "installing AssemblyScript from npm (sdk/assemblyscript)"; \
		cd sdk/assemblyscript && npm ci --no-audit --no-fund || { echo "npm ci failed in sdk/assemblyscript"; exit 1; }; \
	fi

build: deps
	$(GO) build -o bin/flowhost ./cmd/flowhost

# demo builds the example plugins, generates orders and payments, runs the
# join pipeline and prints its ordered output and the cross-stream figure.
demo: build
	$(GO) run ./examples/demo

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

unit:
	$(GO) test -race -count=1 -timeout 20m ./...
	# The WAT guest's side-by-side tests against the Go guest are too slow
	# under the race detector (wazero compiles the 4 MB Go guest ten times
	# slower), so they run here without it rather than not at all.
	$(GO) test -count=1 ./sdk/wat/
	# The hostile-plugin suite takes minutes under the race detector
	# (wazero compiles its Go guests ten times slower); it runs here
	# without it.
	$(GO) test -count=1 -timeout 15m -run '^TestHostilePluginsBesideAGoodOne$$' ./host/
	# Without cgo (or with -tags nowasmtime) flowhost builds without the
	# wasmtime engine and says so when a plugin asks for it.
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/flowhost
	$(GO) test -count=1 -tags nowasmtime -run NoWasmtime ./host/engine/
	# The Extism comparison is its own module, so that the product never
	# depends on Extism; its correctness test runs here.
	cd host/internal/extismbench && $(GO) test -count=1 ./...
	# So is the Benthos comparison: its test checks both measured paths
	# deliver every record, in order, unchanged.
	cd host/internal/benthosbench && $(GO) test -count=1 ./...

# Every fuzz target runs for FUZZTIME on top of its seed corpus (which the
# unit run already executes). Go 1.26's fuzz coordinator can fail a
# duration-bounded run with a bare "context deadline exceeded" when the
# time is up while a worker is busy (go.dev/issue/75804, fixed in Go 1.27):
# such a failure that wrote no failing input is said so and run once more;
# any other failure, or the same one twice, fails.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			for try in 1 2; do \
				if $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg >.fuzz.log 2>&1; then \
					cat .fuzz.log; break; \
				fi; \
				cat .fuzz.log; \
				if [ $$try = 1 ] && grep -q 'context deadline exceeded' .fuzz.log && ! grep -q 'Failing input written' .fuzz.log; then \
					echo "fuzz $$pkg $$f: Go's fuzztime race (go.dev/issue/75804), no failing input: running it again"; \
				else \
					rm -f .fuzz.log; exit 1; \
				fi; \
			done; \
		done; \
	done; rm -f .fuzz.log

test: deps vet unit fuzz

# bench runs, in one invocation, every figure of the README's one table on
# the same input (BENCH_RECORDS records of about 100 bytes): the limit
# baseline, flowhost native and its C, Rust, AssemblyScript and Go guests,
# exactly-once, and Benthos (host/internal/benthosbench, a module of its
# own) with a no-op processor and with a wazero call per message, also
# alternating with flowhost native in one process (BenchmarkSameProcess),
# whose ratios hold best on a loaded machine. The go test lines show as
# they come; the table (msgs/s and the ratio to flowhost native of this
# run) comes last, then the other figures of issue 13 beside their goals:
# the native path's costs per message and scaling (BenchmarkNativeHost),
# response decoding (abi), exactly-once's disk bytes and p99 latency in
# five runs, and peak RSS over 1M and 10M records. bench-all runs every
# benchmark instead.
BENCH_RECORDS ?= 1000000
bench: deps
	@set -o pipefail; log=$$(mktemp); \
	$(GO) test -run '^$$' -bench '^(BenchmarkLimit|BenchmarkIdentityLanguages|BenchmarkExactlyOnce|BenchmarkNativeHost|BenchmarkNativeHostRSS)$$' -benchtime 1x -timeout 60m ./host/ -args -records $(BENCH_RECORDS) | tee $$log \
	&& $(GO) test -run '^$$' -bench '^BenchmarkExactlyOnceLatency$$' -benchtime 1x -count 5 -timeout 30m ./host/ | tee -a $$log \
	&& $(GO) test -run '^$$' -bench '^BenchmarkDecodeResponse$$' ./abi/ | tee -a $$log \
	&& (cd host/internal/benthosbench && $(GO) test -run '^$$' -bench '^(BenchmarkBenthos|BenchmarkSameProcess)$$' -benchtime 1x -timeout 30m . -args -records $(BENCH_RECORDS)) | tee -a $$log \
	&& echo && echo "$(BENCH_RECORDS) records per figure, one run, $$(nproc) cores, load average $$(cut -d' ' -f1-3 /proc/loadavg):" \
	&& $(GO) run ./host/internal/benchtable $$log; rc=$$?; rm -f $$log; exit $$rc

bench-all:
	$(GO) test -run '^$$' -bench . -benchmem ./...
