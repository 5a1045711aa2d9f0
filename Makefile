# pytest-envtest: the two commands a fresh machine needs are `make test` and `make demo`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
K8S_VERSION ?= 1.37
PYTEST_ARGS ?=
# make test runs two pytest-xdist workers more than there are cores (each worker its own control
# plane): part of a worker's time is waiting on planes, operators and timeouts, which the spare
# workers fill (2 cores, bench/bench_suite.py: 384 s with 3 workers, 372 s with 4, although the
# fourth worker's planes cost 40 CPU s more).  Workers steal queued tests from each other and
# start with the long ones (tests/conftest.py), so none idles at the end.  1 for serial.
TEST_WORKERS ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) + 2 )))
# make matrix: empty runs every minor from 1.29 installed here; name some to obtain them first
MATRIX_VERSIONS ?=
# Python writes its bytecode, and pytest its assertion-rewritten modules, to __pycache__ even
# where the environment says not to (PYTHONDONTWRITEBYTECODE, set on some CI images): the suite
# starts some 150 Python processes, each importing ~220 of the framework's modules, and without
# the cache each compiles and rewrites them again (0.55 CPU s per process measured here, about
# a tenth of the suite's CPU on two cores).
unexport PYTHONDONTWRITEBYTECODE
# The suite's etcd and kube-apiservers collect garbage less often than lean's GOGC=50 (a GOGC in
# the environment wins over it): the suite is CPU-bound on two cores and ~130 planes start in
# it, and at 400 a kube-apiserver spends ~0.6 CPU s less on its start (1.9 -> 1.3 CPU s by 2 s
# after ready, measured here) for ~115 MiB more (225 -> 341 MiB RSS).  A machine short of
# memory runs `make test SUITE_GOGC=50`.
SUITE_GOGC ?= 400
# Go may be installed without being on PATH in non-login shells.
export PATH := $(PATH):/usr/local/go/bin

.PHONY: setup chromium binaries test test-minimums test-reliability test-cross demo bench matrix lint docs package lint-workflows clean

$(VENV)/.installed: pyproject.toml operator/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]' -e './operator[test]'
	@touch $@

## setup: a virtualenv with both distributions installed editable, with their test extras
setup: $(VENV)/.installed

## chromium: headless Chromium for the timeline report's rendering test (best effort: where
## apt-get works; elsewhere that test skips and says why)
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	    { apt-get install -y -qq chromium >/dev/null 2>&1 || \
	      { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; }; } \
	    && echo "installed chromium"; } || echo "chromium not installed: the report-rendering test will skip"

## binaries: kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kubectl for
## K8S_VERSION (obtained once per machine, then cached; kubectl as the README's install line and
## `envtest up` say, so `envtest use 1.37 --with kubectl --installed-only` finds it)
binaries: setup chromium
	$(BIN)/envtest use $(K8S_VERSION) --with kube-controller-manager --with kube-scheduler \
	  --with kubectl -p path

## test: everything the README promises, on the default Kubernetes version
test: binaries
	GOGC=$(SUITE_GOGC) ENVTEST_K8S_VERSION=$(K8S_VERSION) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

## test-minimums: the oldest version of every dependency the package declares (each `name>=X`
## of pyproject.toml, and kopf's), installed in a virtualenv of their own, on a representative
## part of the suite: objects, waits, fixtures, operators of every kind, faults, API calls,
## webhooks, snapshots, exploration, services, Pods and the examples (a declared range is a
## promise only when its floor is run).  The Ray operator is installed without its own
## dependencies: the root conftest imports it, no test here runs it.
MIN_VENV ?= .venv-minimums
MIN_TESTS ?= tests/framework/test_crds_and_apply.py tests/framework/test_objects.py \
  tests/framework/test_waiting.py tests/framework/test_fixtures.py \
  tests/framework/test_operator_runner.py tests/framework/test_faults.py \
  tests/framework/test_api_calls.py tests/framework/test_webhooks.py \
  tests/framework/test_snapshots.py tests/framework/test_exploration.py \
  tests/framework/test_services.py tests/framework/test_pods.py \
  tests/examples/test_kopf_webapp.py tests/examples/test_go_operator.py \
  tests/framework/test_strategies.py

$(MIN_VENV)/.installed: pyproject.toml .ci/floors.py
	@test -x $(MIN_VENV)/bin/python || $(PYTHON) -m venv $(MIN_VENV)
	$(PYTHON) .ci/floors.py kopf operations > $(MIN_VENV)/floors.txt
	$(MIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	  -c $(MIN_VENV)/floors.txt -e '.[kopf,operations]' pytest-xdist pytest-timeout
	$(MIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e ./operator
	@touch $@

test-minimums: binaries $(MIN_VENV)/.installed
	@$(MIN_VENV)/bin/python -m pip list --disable-pip-version-check 2>/dev/null | \
	  grep -i -E '^(kubernetes|pytest|httpx|aiohttp|kopf|cryptography|pyyaml|hypothesis) '
	GOGC=$(SUITE_GOGC) ENVTEST_K8S_VERSION=$(K8S_VERSION) $(MIN_VENV)/bin/python -m pytest \
	  -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal $(MIN_TESTS) $(PYTEST_ARGS)

## test-reliability: what `make test` leaves out, each with its reason in its marker: the long
## fault loops (interrupts, kills), a real Go build of the binaries, a Go operator explored
test-reliability: binaries
	GOGC=$(SUITE_GOGC) ENVTEST_K8S_VERSION=$(K8S_VERSION) $(BIN)/python -m pytest -m reliability $(PYTEST_ARGS)

## test-cross: the Go build cross-compiles darwin/arm64 binaries (minutes; not in make test)
test-cross: binaries
	ENVTEST_K8S_VERSION=$(K8S_VERSION) $(BIN)/python -m pytest -m cross tests/framework/test_cross_build.py $(PYTEST_ARGS)

## demo: the seed scenario, with and without the gate, with a timeline and a chart
demo: binaries
	ENVTEST_K8S_VERSION=$(K8S_VERSION) $(BIN)/python -m bench.demo

## bench: start/stop, per-test overhead and status-write figures, written to bench/results
bench: binaries
	ENVTEST_K8S_VERSION=$(K8S_VERSION) $(BIN)/python -m bench.run_all

## matrix: the operator suite on each Kubernetes minor installed (or MATRIX_VERSIONS), as a
## table and bench/results/matrix.json
matrix: setup
	$(BIN)/python -m bench.matrix $(MATRIX_VERSIONS)

lint: setup
	$(BIN)/ruff check fixtures operator tests bench conftest.py
	$(BIN)/mypy fixtures/envtest operator/ray_operator
	$(BIN)/lint-imports
	$(BIN)/mkdocs build --strict --quiet

## docs: the guides and the API reference as a site in build/site (mkdocs serve to browse)
docs: setup
	$(BIN)/mkdocs build --strict

## package: the distribution builds cleanly and its metadata passes twine check
package: setup
	rm -rf dist
	$(BIN)/python -m build --outdir dist . >/dev/null
	$(BIN)/twine check --strict dist/*

## lint-workflows: actionlint (built with the local Go) and zizmor on .github/workflows
lint-workflows: setup
	go run github.com/rhysd/actionlint/cmd/actionlint@v1.7.12 .github/workflows/*.yml
	$(BIN)/zizmor --offline action.yml
	$(BIN)/zizmor --offline .github/workflows

clean:
	rm -rf $(VENV) $(MIN_VENV) .pytest_cache .mypy_cache .ruff_cache artifacts build dist
