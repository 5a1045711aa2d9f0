"""Exploration finds a planted bug of each of Sieve's three patterns, and nothing in its twin.

The operators are in ``tests/examples/planted`` (its README says which bug each has): a Go
binary with an intermediate-state bug, a kopf operator with a stale-state bug, a Python
thread operator with an unobserved-state bug, each writing a heartbeat so that the number
of writes before the one that matters changes from run to run.  Each is explored with the
kind of its pattern: the buggy variant must come out as ``bug`` at the point that names the
request (or change) its bug hangs on, the "again" line it prints must find it again with the
same judgment, and its fixed twin must come out with no finding at all.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.go_operator import GoUnavailable, build_go_operator

pytest_plugins = ["pytester"]
PLANTED = Path(__file__).resolve().parents[1] / "examples" / "planted"


@pytest.fixture
def planted(inner_pytester: Any) -> Any:
    for source in PLANTED.iterdir():
        target = Path(inner_pytester.path) / source.name
        if source.is_dir():
            shutil.copytree(source, target)
        elif source.suffix == ".py":
            shutil.copy(source, target)
    return inner_pytester


def explore(pytester: Any, tmp_path: Path, name: str, *args: str) -> tuple[Any, str, dict]:
    summary = tmp_path / f"{name}.json"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                           f"--envtest-explore-json={summary}", *args,
                                           timeout=600)
    output = result.stdout.str()
    return result, output, json.loads(summary.read_text()) if summary.exists() else {}


def findings(summary: dict) -> list[tuple[str, str]]:
    """(verdict, label) of every point that is a finding: a bug, flaky, a slow recovery."""
    return [(o["verdict"], o["point"]["label"]) for test in summary["tests"]
            for o in test["outcomes"] if o["verdict"] in ("bug", "flaky", "slow recovery")]


def again(output: str, label: str) -> list[str]:
    block = output.split(f"BUG {label}", 1)[1]
    line = next(line for line in block.splitlines() if line.strip().startswith("again:"))
    command = shlex.split(line.split("again:", 1)[1])
    assert command[:1] == ["pytest"] and "--envtest-explore-point" in command, line
    return command[1:]


def assert_found_again(pytester: Any, tmp_path: Path, output: str, label: str) -> None:
    rerun, rerun_output, summary = explore(pytester, tmp_path, "again", *again(output, label))
    rerun.assert_outcomes(failed=1)
    assert findings(summary) == [("bug", label)], rerun_output


def test_an_intermediate_state_bug_of_a_go_operator(planted: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        binary = build_go_operator(tmp_path / "go")
    except GoUnavailable as missing:
        pytest.skip(str(missing))
    monkeypatch.setenv("ORDER_KEEPER", str(binary))
    monkeypatch.setenv("ORDER_KEEPER_UNSAFE", "1")
    result, output, summary = explore(planted, tmp_path, "unsafe", "--envtest-explore=crashes",
                                      "scenario_orders.py")
    result.assert_outcomes(failed=1)
    label = "crash after the 1st patch of configmaps order-1"
    assert findings(summary) == [("bug", label)], output
    assert_found_again(planted, tmp_path, output, label)
    monkeypatch.delenv("ORDER_KEEPER_UNSAFE")
    result, output, summary = explore(planted, tmp_path, "safe", "--envtest-explore=crashes",
                                      "scenario_orders.py")
    result.assert_outcomes(passed=1)
    assert findings(summary) == [], output


def test_a_stale_state_bug_of_a_kopf_operator(planted: Any, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUCKET_DELETE", "blind")
    result, output, summary = explore(planted, tmp_path, "blind", "--envtest-explore=stale",
                                      "scenario_buckets.py")
    result.assert_outcomes(failed=1)
    found = findings(summary)
    label = ("stale view: restarted after create configmaps photos-data once deleted came, "
             "seeing the 1st change (metadata.deletionGracePeriodSeconds+metadata."
             "deletionTimestamp) of buckets photos for 3 s")
    assert ("bug", label) in found and {verdict for verdict, _ in found} == {"bug"}, output
    assert "churn: configmaps photos-data deleted 2 times (the clean runs: 1)" in output
    assert_found_again(planted, tmp_path, output, label)
    monkeypatch.setenv("BUCKET_DELETE", "owned")
    result, output, summary = explore(planted, tmp_path, "owned", "--envtest-explore=stale",
                                      "scenario_buckets.py")
    result.assert_outcomes(passed=1)
    assert findings(summary) == [], output


def test_an_unobserved_state_bug_of_a_python_operator(planted: Any, tmp_path: Path) -> None:
    result, output, summary = explore(planted, tmp_path, "migrations",
                                      "--envtest-explore=unobserved", "scenario_migrations.py")
    result.assert_outcomes(failed=1, passed=1)  # edge-triggered, then level-triggered
    label = ("unobserved: the 1st change (data.version) of configmaps db held back until the "
             "next (data.version)")
    by_test = {t["nodeid"].split("[")[-1].rstrip("]"): t for t in summary["tests"]}
    assert findings({"tests": [by_test["edge"]]}) == [("bug", label)], output
    assert findings({"tests": [by_test["level"]]}) == [], output
    assert "db-migration-v1-to-v3" in output, output  # the migration that does not exist
    assert_found_again(planted, tmp_path, output, label)
