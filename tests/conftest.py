"""How this repository's suite is laid out over pytest-xdist's workers: the long tests first.

``make test`` runs ``--dist worksteal``: each worker is handed one contiguous
share of the collected tests at the start, runs it front to back, and a worker
that runs out takes the back half of the longest queue left.  In collection
order the long tests (exploration runs, inner sessions, the docs examples)
fall where their files do, so one worker could still be inside a 40 s test
while the others had nothing left (30 s of an idle core at the end of every
run, measured by ``bench/bench_suite.py``).  Here the tests known to be long
(``tests/durations.json``, written by ``python -m bench.bench_suite
--durations-out tests/durations.json``) are spread over the shares, longest
first onto the least loaded, at the front of each share; the short ones follow
them, a test file at a time to the share with the least work, so each share
holds about as much work and stealing only evens out the end.  A test missing
from the file counts as short: a stale file costs balance, never a test.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import _pytest.pytester
import pytest

from tests.support.balance import reorder

DURATIONS = Path(__file__).resolve().parent / "durations.json"

#: The docs examples run all at once in one session fixture, paid by whichever of them a
#: worker runs first (a worker that took some too would wait for that run).
DOCS_EXAMPLES = "tests/docs/test_examples.py::test_example["


def together(item: pytest.Item) -> str | None:
    """The key of the tests that go to one worker: the docs examples; and the tests on one
    cluster other than the session's default (a profile, controllers), which each worker
    that runs one starts and keeps to the end of the session (a "cluster" profile plane:
    about 5 CPU s to start and 0.025 CPU s every second after, measured here)."""
    if item.nodeid.startswith(DOCS_EXAMPLES):
        return DOCS_EXAMPLES
    if item.get_closest_marker("envtest_isolated"):
        return None  # a plane of its own whatever it asks for
    cluster = [f"{name}={marker.args}" for name in ("envtest_profile", "envtest_controllers")
               for marker in [item.get_closest_marker(name)] if marker is not None]
    return "cluster: " + ", ".join(cluster) if cluster else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 1 and DURATIONS.exists():
        items[:] = reorder(items, json.loads(DURATIONS.read_text()), workers, together)


@pytest.fixture(autouse=True, scope="session")
def pytester_keeps_library_modules(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``pytester`` forgets, after its test, every module imported during it, so an inner
    run's test modules do not leak.  It also forgot the library modules this process's own
    threads and the test itself imported meanwhile (the kubernetes client imports its
    models lazily): imported again later, ``V1Namespace`` was a second class, and
    ``CoreV1Api.create_namespace`` (validated against the first) refused it.  Here only the
    modules whose files are in this session's temporary folders (the inner runs' own) are
    forgotten."""
    inner_runs = tmp_path_factory.getbasetemp().resolve()

    def from_an_inner_run(name: str) -> bool:
        where = getattr(sys.modules.get(name), "__file__", None)
        return where is None or Path(where).resolve().is_relative_to(inner_runs)

    original = _pytest.pytester.SysModulesSnapshot

    class KeepLibraries(original):  # type: ignore[misc, valid-type]
        def __init__(self, preserve: Callable[[str], bool] | None = None) -> None:
            super().__init__(lambda name: bool(preserve and preserve(name))
                             or not from_an_inner_run(name))

    _pytest.pytester.SysModulesSnapshot = KeepLibraries  # type: ignore[misc]
    yield
    _pytest.pytester.SysModulesSnapshot = original  # type: ignore[misc]
