# make build:     set up a virtualenv, install dashgen, compile its modules, render rendered/.
# make test:      the same set-up plus Prometheus', Alertmanager's and VictoriaMetrics' tools, then
#                 ruff's linter (`make style`), `dashgen check` and the suite, two workers a core, less the exhaustive `slow` tests (~2.75 min on 2 cores).
# make test-fast: the edit loop: no live servers or processes, no heavy tool runs (~30 s on 2 cores).
# make test-slow: only the `slow` tests: the exhaustive ones (every rule replayed on VictoriaMetrics, many killed
#                 builds) and the chains of minutes (fresh installs, the public corpus, promtool on mutated rules).
# make test-all:  test, then test-slow: everything, as CI runs it (.ci/run).
# Markers (pyproject.toml): live, heavy, slow. PYTEST_WORKERS=1 (TEST_FAST_WORKERS=1) runs the suite (test-fast's) in one process.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
CORES  := $(shell nproc)
# Twice the cores: many tests wait on servers (replays, live chains) while others compute. test-fast's
# tests wait on none, and each worker collects the whole suite: one worker a core there.
PYTEST_WORKERS ?= $(shell echo $$(( $(CORES) * 2 )))
TEST_FAST_WORKERS ?= $(CORES)
PYTEST  = $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS)
# The installed packages dashgen, its tests and benchmarks import (their modules are byte-compiled at set-up).
IMPORTED_MODULES = yaml, jinja2, click, grafanalib, jsonschema, promql_parser, prometheus_client, numpy, \
	matplotlib.pyplot, PIL, pytest, xdist, uvicorn, rl_insight, ray, torch, transformers, transformers.trainer, \
	tensorboard.compat.proto.event_pb2, google_crc32c
# Debian's package; apt needs root, so use sudo when not root and it exists.
SUDO   := $(shell [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null && echo sudo)

.PHONY: build compile check lint style test test-fast test-slow test-all rules-test prometheus alertmanager victoria-metrics bench clean

$(BIN)/dashgen: pyproject.toml
	@# The pip that venv installs (23 or later) installs all of this: upgrading it first cost a trip to the index.
	$(PYTHON) -m venv $(VENV)
	@# The distribution was called dashgen before it became dashgen-rl (PyPI's dashgen is another project):
	@# a virtualenv made before then drops the old name first, whose command would shadow the new one.
	$(BIN)/pip uninstall --quiet --yes dashgen 2>/dev/null || true
	@# pip byte-compiles every module it installs, 14,000 here (torch, transformers and ray: 7,700), most of
	@# the set-up's time; dashgen and its tests import a few hundred. Importing those once with bytecode
	@# writing on compiles just them (below, and `compile` for dashgen's own).
	$(BIN)/pip install --quiet --no-compile -e '.[test]'
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -c 'import $(IMPORTED_MODULES)'
	touch $@

# An editable install leaves dashgen's own modules uncompiled (panels/ and alerts/ are in the
# package as dashgen_panels and dashgen_alerts), and a Python run with PYTHONDONTWRITEBYTECODE
# never writes their .pyc: every command compiled them again (about an eighth of `dashgen build`'s CPU).
# compileall writes them (only what changed since it last did); compile_templates does the same
# for the Jinja templates (dashgen/compiler/output/rendering.py).
compile: $(BIN)/dashgen
	$(BIN)/python -m compileall -q dashgen panels alerts
	$(BIN)/python -c 'from dashgen.compiler.output.rendering import compile_templates; compile_templates()'

build: compile
	$(BIN)/dashgen build

check: compile
	$(BIN)/dashgen check

# promtool and prometheus from the Debian package, when missing.
prometheus:
	@if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then \
		echo "installing Prometheus (Debian package prometheus)"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	fi

# Alertmanager and amtool from the Debian package (0.25 on bookworm), when missing.
alertmanager:
	@if ! command -v amtool >/dev/null 2>&1 || ! command -v prometheus-alertmanager >/dev/null 2>&1; then \
		echo "installing Alertmanager (Debian package prometheus-alertmanager)"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null; \
	fi

# VictoriaMetrics and vmalert from the Debian package (1.79 on bookworm), when missing: lint's
# `vmalert -dryRun` and the replay test (tests/replay/test_victoriametrics.py).
victoria-metrics:
	@if ! command -v vmalert >/dev/null 2>&1 || ! command -v victoria-metrics >/dev/null 2>&1; then \
		echo "installing VictoriaMetrics (Debian package victoria-metrics)"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends victoria-metrics >/dev/null; \
	fi

lint: compile prometheus alertmanager victoria-metrics
	$(BIN)/dashgen lint

rules-test: compile prometheus alertmanager victoria-metrics
	$(BIN)/dashgen test

# ruff's linter ([tool.ruff] in pyproject.toml): an unused import or an undefined name fails the suite first.
style: $(BIN)/dashgen
	$(BIN)/ruff check dashgen alerts panels tests bench

test: compile style prometheus alertmanager victoria-metrics
	$(BIN)/dashgen check
	$(PYTEST) -m "not slow"

test-fast: compile style prometheus alertmanager victoria-metrics
	$(BIN)/python -m pytest -q -n $(TEST_FAST_WORKERS) -m "not live and not heavy and not slow"

test-slow: compile prometheus alertmanager victoria-metrics
	$(PYTEST) -m slow

test-all: test test-slow

bench: compile prometheus
	for script in bench/[!_]*.py; do $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) *.egg-info
