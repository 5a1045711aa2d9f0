"""A pytest plugin for ``bench_suite``: each test's seconds (set-up, call, tear-down) and what
kind of work it does, written as JSON by the controller at the session's end.

Loaded with ``-p bench.suite_items`` and ``--suite-items=FILE``.  The kind comes from the
item itself, on the worker that ran it (its fixtures, markers and module), and travels to
the controller in the report's ``user_properties``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_PROPERTY = "bench_suite_group"
#: The process that ran the test (an xdist worker): its descendants' CPU is the test's.
_PID = "bench_suite_pid"

#: What a test does that costs time, first match wins: (group, how to recognise it).
GROUPS = (
    "exploration runs (inner sessions that run a test once per fault point)",
    "docs examples (one inner session of every example, and the example scripts)",
    "inner pytest runs (a session of the plugin's own, a plane of its own)",
    "tests that start control planes of their own (isolated, make_control_plane, restarts)",
    "cluster profile (controllers, scheduler, simulated Nodes)",
    "operator suite (tests/operator)",
    "the rest (one session plane per worker)",
)


def group_of(item: pytest.Item) -> str:
    path = str(getattr(item, "path", item.nodeid))
    names = set(getattr(item, "fixturenames", ()))
    if "exploration" in Path(path).name:
        return GROUPS[0]
    if "/tests/docs/" in path:
        return GROUPS[1]
    if names & {"pytester", "inner_pytester", "own_plane_pytester", "testdir"}:
        return GROUPS[2]
    if names & {"make_control_plane"} or item.get_closest_marker("envtest_isolated") \
            or "test_controlplane" in path or "test_cluster_death" in path:
        return GROUPS[3]
    profile = item.get_closest_marker("envtest_profile")
    if (profile is not None and "cluster" in profile.args) or \
            names & {"kubelet", "nodes", "pods", "pod_simulator"}:
        return GROUPS[4]
    if "/tests/operator/" in path:
        return GROUPS[5]
    return GROUPS[6]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-items", default=None, help="bench_suite: write per-test seconds")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    report = yield
    report.user_properties.append((_PROPERTY, group_of(item)))
    report.user_properties.append((_PID, os.getpid()))
    return report


class _Collector:
    def __init__(self, target: Path) -> None:
        self.target = target
        self.tests: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.tests.setdefault(report.nodeid, {"seconds": 0.0, "outcome": "passed"})
        entry["seconds"] += report.duration
        entry.setdefault("start", report.start)
        entry["stop"] = report.stop
        node = getattr(report, "node", None)
        if node is not None:
            entry["worker"] = node.gateway.id
        entry[report.when] = round(report.duration, 3)
        for name, value in report.user_properties:
            if name == _PROPERTY:
                entry["group"] = value
            elif name == _PID:
                entry["pid"] = value
        if report.failed:
            entry["outcome"] = "failed"
        elif report.skipped and entry["outcome"] == "passed":
            entry["outcome"] = "skipped"

    def pytest_sessionfinish(self) -> None:
        self.target.write_text(json.dumps(self.tests, indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("--suite-items")
    if target and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Collector(Path(target)), "bench-suite-collector")
