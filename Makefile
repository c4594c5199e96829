# The two commands: `make run` and `make test`. Both install what is missing first.
NPM ?= npm
export NODE_OPTIONS ?=

.PHONY: install console run test check ci codegen codegen-check spec-lint contract-check lint typecheck format format-check layers build bench bench-latency bench-throughput bench-large bench-pending-lists

# The stamp holds the install's inputs as they were installed: a newer file with the same content (a
# fresh clone, worktree or checkout) only refreshes the stamp instead of reinstalling everything.
INSTALL_INPUTS := package.json package-lock.json $(sort $(wildcard patches/*.patch))
node_modules/.install-stamp: $(INSTALL_INPUTS)
	@if [ -f $@ ] && cat $(INSTALL_INPUTS) | cmp -s - $@; then touch $@; \
	else $(NPM) ci --no-audit --no-fund && cat $(INSTALL_INPUTS) > $@; fi

install: node_modules/.install-stamp

# The web console (README "Console"): Vite builds console/ into console/dist (not committed), which
# the service serves at /console. Rebuilt only when its sources or the SDK changed (about a second).
CONSOLE_SOURCES := console/index.html console/vite.config.ts $(wildcard console/src/*.ts console/src/*.tsx console/src/*.css console/src/views/*.tsx) $(wildcard clients/typescript/*.ts clients/typescript/generated/*.ts)
console/dist/index.html: node_modules/.install-stamp $(CONSOLE_SOURCES)
	npx vite build console --logLevel warn

console: console/dist/index.html

# The server as plain JavaScript in dist/server/ (scripts/build-server.ts: esbuild, under a second,
# so every `make run` rebuilds it and never runs a stale bundle), and the console it serves: what a
# deployment builds before it runs `node dist/server/main.js` (README "systemd").
build: install console
	node --import tsx scripts/build-server.ts

# exec: the server replaces make's shell, so a signal to it (or the SIGTERM make passes on) stops it.
# No --enable-source-maps: it cost ~10 % of the requests per second; the log maps the stack traces of
# the errors it writes to src/ files and lines itself (src/source-maps.ts).
run: install console build
	exec node dist/server/main.js

test: install console build
	npx vitest run

codegen: install
	npx tsx codegen/generate.ts

codegen-check: install
	npx tsx codegen/generate.ts --check

spec-lint: install
	npx redocly lint openapi.yaml --format=summary

# Breaking changes against the last released contract (contract/released/README.md): fails unless
# info.version changed.
contract-check: install
	npx tsx codegen/contract-check.ts

typecheck: install
	npx tsc --noEmit
	npx tsc --noEmit -p console

lint: install
	npx eslint .

format: install
	npx prettier --write .

format-check: install
	npx prettier --check .

# The layering of src/ (README "Code layout"); the rules and why are in .dependency-cruiser.cjs.
layers: install
	npx depcruise src codegen --config .dependency-cruiser.cjs

check: format-check lint typecheck codegen-check spec-lint contract-check layers

ci: check test

# Every benchmark, one after the other, even under -j (about 25 minutes; each target below runs one
# alone).
bench:
	$(MAKE) bench-latency
	$(MAKE) bench-throughput
	$(MAKE) bench-large
	$(MAKE) bench-pending-lists

# Latency of the hot paths in-process, as ratios against a baseline measured in the same run, the
# driver tables and the round trips (bench/run.ts; about 3 minutes).
bench-latency: install
	npx tsx bench/run.ts

# The service vs a bare Hono + postgres.js server under the same concurrent load, as real processes
# (bench/throughput.ts; about 12 minutes, best on an otherwise idle machine).
bench-throughput: install build
	node --import tsx bench/throughput.ts

# Lists, search and the audit stream at 1,000,000 objects and 5,000,000 events, each against the
# hand-written indexed SQL for the same rows (bench/large.ts; about 10 minutes, creates and drops
# its own database; BENCH_LARGE_OBJECTS / BENCH_LARGE_EVENTS size it). It runs itself bundled, as the
# service is deployed (dist/bench/large.js).
bench-large: install
	node --import tsx bench/large.ts

# Reads through the service while updates stream into the database, with the worker that merges
# the GIN indexes' pending lists and without it, each against the same reads with no writes
# (bench/pending-lists.ts; about 4 minutes, creates and drops its own database).
bench-pending-lists: install build
	node --import tsx bench/pending-lists.ts
