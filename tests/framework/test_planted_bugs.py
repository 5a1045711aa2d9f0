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
    assert ("bug", label) in findings(summary), output
    # The same bug met by timing: a kill after a heartbeat the keeper's beat goroutine sent
    # between the order's "done" and its receipt (a busy runner stretches that gap) loses
    # the receipt once, and its re-run, killed elsewhere, does not: flaky, on the beat, for
    # the missing receipt (a CI run with four workers on two cores had one).
    others = [o for test in summary["tests"] for o in test["outcomes"]
              if o["verdict"] in ("bug", "flaky", "slow recovery")
              and o["point"]["label"] != label]
    assert all(o["verdict"] == "flaky" and "order-keeper-heartbeat" in o["point"]["label"]
               and "not met within 5 s" in o["reason"] for o in others), output
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
    label = ("stale view: restarted once configmaps photos-data is made again, seeing "
             "buckets photos (custom resource) as before the 1st delete of configmaps "
             "photos-data, for 3 s")
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
    label = ("unobserved: the 1st change of data.version of configmaps db held back until "
             "the next change of data.version")
    by_test = {t["nodeid"].split("[")[-1].rstrip("]"): t for t in summary["tests"]}
    assert findings({"tests": [by_test["edge"]]}) == [("bug", label)], output
    assert findings({"tests": [by_test["level"]]}) == [], output
    assert "db-migration-v1-to-v3" in output, output  # the migration that does not exist
    assert_found_again(planted, tmp_path, output, label)


def test_a_stale_state_bug_with_a_built_in_parent(planted: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """No custom resource: the parent is a ConfigMap, its store related to it only by the
    owner reference and its name.  Before, stale points came only from changes of custom
    resources or of the deleted object itself: none was made here."""
    monkeypatch.setenv("STORE_DELETE", "blind")
    result, output, summary = explore(planted, tmp_path, "blind", "--envtest-explore=stale",
                                      "scenario_stores.py")
    result.assert_outcomes(failed=1)
    found = findings(summary)
    assert [verdict for verdict, _ in found] == ["bug"], output
    label = found[0][1]
    assert label.startswith("stale view: restarted once configmaps shop-store is made again, "
                            "seeing configmaps shop (") and "before the 1st delete of " \
        "configmaps shop-store" in label, label
    assert "churn: configmaps shop-store deleted 2 times (the clean runs: 1)" in output
    # Its report is in pytest's temporary folder (no --envtest-artifacts): the summary says
    # that folder keeps three runs, and how to keep the reports (they were rotated away).
    assert "keeps its last three runs: --envtest-artifacts DIR writes them" in output
    monkeypatch.setenv("STORE_DELETE", "owned")
    result, output, summary = explore(planted, tmp_path, "owned", "--envtest-explore=stale",
                                      "scenario_stores.py")
    result.assert_outcomes(passed=1)
    assert findings(summary) == [], output
    assert summary["tests"][0]["outcomes"], output  # a point was made, and passed


def test_a_stale_state_bug_on_an_object_another_controller_makes_again(
        planted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim the keeper deletes is made again by the StatefulSet controller, never by the
    keeper (ZooKeeper's operator, pravega/zookeeper-operator#312): its point restarts the
    keeper once the claim of another uid is served to it."""
    monkeypatch.setenv("SHELF_CLAIMS", "blind")
    result, output, summary = explore(planted, tmp_path, "blind", "--envtest-explore=stale",
                                      "scenario_shelves.py")
    result.assert_outcomes(failed=1)
    label = ("stale view: restarted once persistentvolumeclaims data-books-0 is made again, "
             "seeing shelves books (custom resource) as before the 1st delete of "
             "persistentvolumeclaims data-books-0, for 3 s")
    assert ("bug", label) in findings(summary), output
    assert "churn: persistentvolumeclaims data-books-0 deleted 2 times (the clean runs: 1)" \
        in output, output
    monkeypatch.setenv("SHELF_CLAIMS", "owned")
    result, output, summary = explore(planted, tmp_path, "owned", "--envtest-explore=stale",
                                      "scenario_shelves.py")
    result.assert_outcomes(passed=1)
    assert findings(summary) == [], output


def test_an_unobserved_state_bug_of_a_watching_and_of_a_polling_operator(
        planted: Any, tmp_path: Path) -> None:
    """The edge keeper deletes one part per change it sees: 3 -> 2 -> 1 with the 2 held back
    is one delete for a drop of two.  By watch, the held change's release once sent the next
    version twice (the catch-up event, then the apiserver's own), the keeper deleted twice
    and the bug passed; by polling, lists are held as watches are."""
    result, output, summary = explore(planted, tmp_path, "parts",
                                      "--envtest-explore=unobserved", "scenario_parts.py",
                                      "-n", "2")
    assert result.parseoutcomes()["failed"] == 2, output  # the edge keepers
    label = ("unobserved: the 1st change of data.size of configmaps m held back until the "
             "next change of data.size")
    by_test = {t["nodeid"].split("[")[-1].rstrip("]"): t for t in summary["tests"]}
    assert set(by_test) == {"watch-edge", "watch-level", "poll-edge", "poll-level"}, by_test
    for reader in ("watch", "poll"):
        assert findings({"tests": [by_test[f"{reader}-edge"]]}) == [("bug", label)], output
        assert findings({"tests": [by_test[f"{reader}-level"]]}) == [], output
        level = {o["point"]["label"]: o["verdict"] for o in by_test[f"{reader}-level"]["outcomes"]}
        assert level.get(label) == "passed", level
