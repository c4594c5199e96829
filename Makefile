# The two commands: `make run` and `make test`. Both install what is missing first.
NPM ?= npm
export NODE_OPTIONS ?=

.PHONY: install run test check ci codegen codegen-check spec-lint lint typecheck format format-check bench

node_modules/.install-stamp: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund
	@touch $@

install: node_modules/.install-stamp

run: install
	npx tsx src/main.ts

test: install
	npx vitest run

codegen: install
	npx tsx codegen/generate.ts

codegen-check: install
	npx tsx codegen/generate.ts --check

spec-lint: install
	npx redocly lint openapi.yaml --format=summary

typecheck: install
	npx tsc --noEmit

lint: install
	npx eslint .

format: install
	npx prettier --write .

format-check: install
	npx prettier --check .

check: format-check lint typecheck codegen-check spec-lint

ci: check test

bench: install
	npx tsx bench/run.ts
