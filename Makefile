# Peel — the two fresh-machine commands are `make demo` and `make test`.
# Every target installs what it needs first (scripts/install-deps.sh is idempotent).
SWIFT ?= swift
SWIFT_FLAGS ?= -Xswiftc -warnings-as-errors
RELEASE_FLAGS ?= -c release $(SWIFT_FLAGS)

.PHONY: deps build release demo test unit e2e routes frameworks openapi websockets http1 proxy browser reliability store spool fuzz bench bench-big bench-websocket bench-scanner bench-openapi sanitize container-test soak clean

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

demo: release
	$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel demo

# The offline store's table and connection tests start their own redis-server.
unit: deps
	scripts/install-deps.sh redis-server
	$(SWIFT) build $(SWIFT_FLAGS) --build-tests
	$(SWIFT) test $(SWIFT_FLAGS) --skip-build

e2e: release
	scripts/e2e.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

# Routes and upstream groups (issue 27): several demo upstreams and a Python one, killed and reloaded under ab.
routes: release
	scripts/routes.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

# FastAPI, Flask and Django REST framework apps behind Peel --dialect rest (issue 33): their real
# failures as problems, member by member, and their successes byte for byte (venv in .build/venv-frameworks).
frameworks: release
	scripts/frameworks.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

# `peel openapi` on springdoc, springfox, WeChat-style and FastAPI documents, each output validated by
# openapi-spec-validator (issue 34; venv in .build/venv-openapi).
openapi: release
	scripts/openapi.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

# WebSockets through Peel (issue 38): Python's websockets as backend and client (venv in .build/venv-websockets).
websockets: release
	scripts/websockets.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

http1: release
	scripts/http1.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

proxy: release
	scripts/proxy.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

# Headless Chromium (Debian) against Peel over the DevTools protocol: about 5 s once installed.
browser: release
	scripts/browser.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

reliability: release
	scripts/reliability.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

# The shared offline store (issue 21) against Debian's redis-server, started and stopped by the script.
store: release
	scripts/store.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

# Big answers spooled to disk (issue 35): eight 20 MB answers at once under 96 MiB resident, a disk
# budget and a refused write answered 503, no file left by a killed Peel, /readyz following the spool.
spool: release
	scripts/spool.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

test: unit e2e routes frameworks openapi websockets http1 proxy browser reliability store spool

fuzz: deps
	scripts/fuzz.sh

bench-scanner: deps
	Benchmarks/scanner/run.sh

# 20 MB envelopes (the default dialect's and a RuoYi list) through Peel against nginx proxy_pass
# (issue 35); PEEL_B=path/to/older/peel adds a previous build, CEILING=1 the bounding variants.
bench-big: release
	scripts/install-deps.sh nginx
	PEEL=$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel python3 Benchmarks/bigbody.py

# `peel openapi` on a 5 MB document (2,000 operations) as JSON and as YAML, best of 5 (issue 34: under 1 s).
bench-openapi: release
	python3 Benchmarks/openapi_big.py $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel 5

bench: release
	Benchmarks/run.sh
	COMPRESS=gzip PATHS=big Benchmarks/run.sh
	$(MAKE) bench-big
	STORE=redis PATHS=small TARGETS="direct peel2 peelS" Benchmarks/run.sh
	Benchmarks/run-websocket.sh

bench-websocket: release
	Benchmarks/run-websocket.sh

sanitize: deps
	scripts/install-deps.sh redis-server
	scripts/sanitize.sh

container-test: release
	deploy/test.sh

soak: release
	scripts/soak.sh $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/peel

clean:
	rm -rf .build .build-*
