# Berth: the two commands are `make run` and `make test`.
CARGO  ?= cargo
DEBUG   = target/debug
RELEASE = target/release
# One throwaway Keystone for the test run (the Keystone tests need it).
KEYSTONE = scripts/keystone/with-keystone.sh
# The release `make test-upgrade` upgrades from: its tag, and its commit for
# a clone without tags. Both move on at each release.
UPGRADE_FROM   ?= v0.2.0
UPGRADE_COMMIT ?= 81c8c65749d4698eb6972ac2ec84f84a9926a533
# The debug binaries and every test, in one build. Built apart, the binaries
# and the tests resolve features differently (the house tests turn on
# proc-macro2's span-locations), so each rebuilt nearly every dependency.
BUILD_DEBUG = $(CARGO) build --workspace --all-targets
# Tests run at once: most of a test waits (.config/nextest.toml), so four per
# core, at most 16 (each holds a few of the test server's 400 connections).
TEST_THREADS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); t=$$((n * 4)); [ $$t -gt 16 ] && t=16; echo $$t)

.PHONY: run deps-run test test-ha test-package test-upgrade lint bench bench-pack conformance deps fuzz

## run: berthd dev — a local PostgreSQL under ./.data, demo inventory, http://127.0.0.1:8778
run: deps-run
	$(CARGO) build -p berthd -p berth-cli
	@echo "berth, the client, is target/debug/berth: export PATH=\"$$PWD/target/debug:\$$PATH\""
	$(DEBUG)/berthd dev

## test: every test, against a throwaway PostgreSQL and Keystone started for the run
## (Keystone starts while the tests build)
test: deps
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
	  $(KEYSTONE) --while '$(BUILD_DEBUG)' $(DEBUG)/berthd with-postgres -- $(CARGO) nextest run --workspace --no-fail-fast --test-threads $(TEST_THREADS); \
	else \
	  $(KEYSTONE) --while '$(BUILD_DEBUG)' $(DEBUG)/berthd with-postgres -- $(CARGO) test --workspace --no-fail-fast; \
	fi

## test-ha: failover on PostgreSQL's own streaming replication: a primary and a
## synchronous standby of the test's own, claims and lease creations driven against
## two berthd while the primary stops and the standby is promoted (docs/ha.md)
test-ha: deps
	$(BUILD_DEBUG)
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
	  $(CARGO) nextest run --workspace --run-ignored only -E 'binary(black_box) & test(/^ha::/)' --no-capture; \
	else \
	  $(CARGO) test --workspace --test black_box -- --ignored --nocapture ha::; \
	fi

## test-package: the Debian package (docs/packaging.md), end to end: built from the
## debug binaries, installed with dpkg, the installed berthd started as the berth
## account against a throwaway PostgreSQL until /readyz answers, then purged.
## Root on Debian or Ubuntu; it changes this machine's packages and accounts.
test-package: deps
	$(BUILD_DEBUG)
	$(DEBUG)/berthd with-postgres -- bash scripts/package-test.sh

## test-upgrade: a rolling upgrade: berthd of the last release (UPGRADE_FROM, built
## once under target/upgrade) serves and fires lease events while berthd of this
## tree migrates the same database and joins; then the old one stops (docs/upgrades.md)
test-upgrade: deps
	$(BUILD_DEBUG)
	@old=$$(sh scripts/old-berthd.sh $(UPGRADE_FROM) $(UPGRADE_COMMIT)) && \
	if $(CARGO) nextest --version >/dev/null 2>&1; then \
	  BERTH_OLD_BERTHD=$$old $(CARGO) nextest run --workspace --run-ignored only -E 'binary(black_box) & test(/^upgrade::/)' --no-capture; \
	else \
	  BERTH_OLD_BERTHD=$$old $(CARGO) test --workspace --test black_box -- --ignored --nocapture upgrade::; \
	fi

## conformance: Placement's own API tests (and the osc-placement client) against a
## release berthd and a throwaway PostgreSQL. CONFORMANCE_ARGS='--only inventory.yaml'
## runs one file.
conformance: deps
	$(CARGO) build --release -p berthd
	$(RELEASE)/berthd with-postgres -- sh scripts/conformance.sh $(CONFORMANCE_ARGS)

## lint: formatting and clippy, as CI checks them
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## deps-run: what `make run` needs: the PostgreSQL server binaries
deps-run:
	@sh scripts/ensure-postgres.sh

## deps: the PostgreSQL server binaries, libfaketime, jq and Chromium (Debian/Ubuntu), when
## missing, and Playwright for Python in target/console-venv (the console's browser tests)
deps: deps-run
	@sh scripts/ensure-faketime.sh
	@sh scripts/ensure-command.sh jq jq "the README tour test needs it"
	@sh scripts/ensure-chromium.sh

## bench: ratios against pgbench on the same throwaway server (not part of make test);
## Placement claims also with keystone auth against a throwaway Keystone
bench: deps
	@sh scripts/ensure-command.sh wrk wrk "make bench drives Placement claims over HTTP with it"
	$(CARGO) build --release -p berthd -p berth-bench
	$(KEYSTONE) $(RELEASE)/berthd with-postgres -- $(RELEASE)/berth-bench $(BENCH_ARGS)

## bench-pack: the bench for another x86-64 Linux machine without PostgreSQL or Rust
## (a bigger one, to see how Berth grows with cores): PostgreSQL, pgbench, wrk and the
## release binaries in .bigger-machine/berthpkg.tar.xz; how to run it there: scripts/bench-pack.sh.
## Every ratio the bench prints names the cores it ran on.
bench-pack: deps
	$(CARGO) build --release -p berthd -p berth-bench -p berth-cli
	bash scripts/bench-pack.sh

## fuzz: schemathesis against /openapi.json of a berthd with data in it, every
## operation as admin, member and anonymous; fails on any 5xx, schema mismatch,
## hang or panic, or fewer than FUZZ_MIN_CASES cases (default 10000).
## FUZZ_EXAMPLES=N sets the cases per operation and phase (default 50).
fuzz: deps
	$(BUILD_DEBUG)
	$(DEBUG)/berthd with-postgres -- sh scripts/fuzz.sh
