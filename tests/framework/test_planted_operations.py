"""Operation exploration finds a planted bug of each kind, shrunk to its shortest sequence, and
nothing in the fixed twin.

The operator is ``tests/examples/planted/tanks.py`` (a Python thread polling every namespace);
``TANK_BUG`` plants one bug: a field read only on create (consistency), a boundary value it
loops on (an error loop), a shrink that leaks what a smaller tank never has (differential).
Each is explored with ``--envtest-explore=operations`` on a real plane: the bug must come out
as ``bug`` with the oracle that sees it and a sequence of at most two changes naming the
field, the ``again`` line it prints must replay exactly that sequence and find it again, and
the twin must come out with no finding after the search's whole budget of trials.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.framework.test_planted_bugs import again, explore, findings, planted  # noqa: F401

pytest_plugins = ["pytester"]

LABEL = "spec changes of tanks.planted.example.com t"


@pytest.mark.parametrize(("bug", "oracle", "field"), [
    ("stale-image", "consistency", "spec."),
    ("zero-size", "error loop", "spec.size: 0"),
    ("leaky-shrink", "differential", "spec.size"),
])
def test_a_planted_operation_bug_is_found_shrunk_and_replayed(
        planted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        bug: str, oracle: str, field: str) -> None:
    monkeypatch.setenv("TANK_BUG", bug)
    result, output, summary = explore(planted, tmp_path, bug, "--envtest-explore=operations",
                                      "scenario_tanks.py")
    result.assert_outcomes(failed=1)
    assert findings(summary) == [("bug", LABEL)], output
    (outcome,) = summary["tests"][0]["outcomes"]
    assert any(f.startswith(f"operations: {oracle}") for f in outcome["findings"]), output
    assert 1 <= outcome["sequence"].count("# change ") <= 2, outcome["sequence"]
    assert field in outcome["sequence"], outcome["sequence"]
    assert outcome["first_failure_after"] is not None and outcome["trials"] >= 1
    if bug == "stale-image":  # the field the operator reads on create only
        assert "spec.image" in outcome["sequence"] or "spec.mode" in outcome["sequence"]
    command = again(output, LABEL)
    replayed = json.loads(command[-1].split(";changes=", 1)[1])
    assert len(replayed) == outcome["sequence"].count("# change "), command
    rerun, rerun_output, rerun_summary = explore(planted, tmp_path, f"{bug}-again", *command)
    rerun.assert_outcomes(failed=1)
    assert findings(rerun_summary) == [("bug", LABEL)], rerun_output
    assert rerun_summary["tests"][0]["outcomes"][0]["trials"] == 2, rerun_output  # replayed


def test_the_fixed_tank_keeper_gives_no_finding(planted: Any, tmp_path: Path,  # noqa: F811
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TANK_BUG", raising=False)
    result, output, summary = explore(planted, tmp_path, "fixed",
                                      "--envtest-explore=operations", "scenario_tanks.py")
    result.assert_outcomes(passed=1)
    assert findings(summary) == [], output
    (outcome,) = summary["tests"][0]["outcomes"]
    assert outcome["verdict"] == "passed" and outcome["trials"] >= 8, outcome
    assert outcome["refused"] < outcome["trials"], outcome
