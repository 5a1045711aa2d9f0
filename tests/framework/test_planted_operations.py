"""Operation exploration finds a planted bug of each kind, shrunk to its shortest sequence, and
nothing in the fixed twin.

The operator is ``tests/examples/planted/tanks.py`` (a Python thread polling every namespace);
``TANK_BUG`` plants one bug: a field read only on create (consistency), a boundary value it
loops on (an error loop), a shrink that leaks what a smaller tank never has (differential).
Each is explored with ``--envtest-explore=operations`` on a real plane: the bug must come out
as ``bug`` with the oracle that sees it and a sequence of at most two changes naming the
field, found among the schema's edges the search tries first (``mode: safe``, ``size: 0``,
``size: 4``, the schema's fields in the apiserver's order: each bug sits at one, so it is
found whatever the run's seed; before the edges, 12 seeds of 300 drew no shrink in their 8
examples, and a CI run missed it), the ``again`` line it prints must replay exactly that
sequence and find it again, and the twin must come out with no finding after the search's
whole budget of trials.
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
    assert outcome["first_failure_after"] is not None and 1 <= outcome["trials"] <= 3, outcome
    if bug == "stale-image":  # the field the operator reads on create only
        assert "spec.image" in outcome["sequence"] or "spec.mode" in outcome["sequence"]
    # The edges in the order the apiserver gives the schema (image, mode, size): mode: safe
    # fails the stale config at once; a size: 0 leak or loop comes second, after a passing
    # trial of at least three settles of 1 s: the search's, not the re-run's one trial.
    first = 1 if bug == "stale-image" else 2
    assert outcome["first_failure_trial"] == first, outcome
    assert outcome["first_failure_after"] >= 3.0 * (first - 1), outcome
    changes = outcome["sequence"].count("# change ")
    assert (f"shortest failing sequence ({changes} change(s); the search's trial {first} "
            f"failed first, {outcome['trials']} trial(s) with the re-run):") in output, output
    command = again(output, LABEL)
    replayed = json.loads(command[-1].split(";changes=", 1)[1])
    assert len(replayed) == outcome["sequence"].count("# change "), command
    rerun, rerun_output, rerun_summary = explore(planted, tmp_path, f"{bug}-again", *command)
    rerun.assert_outcomes(failed=1)
    assert findings(rerun_summary) == [("bug", LABEL)], rerun_output
    replayed_outcome = rerun_summary["tests"][0]["outcomes"][0]
    assert replayed_outcome["trials"] == 2, rerun_output  # replayed, twice: no search
    assert replayed_outcome["first_failure_trial"] is None, replayed_outcome
    assert f"shortest failing sequence ({changes} change(s); 2 trial(s) with the re-run):" \
        in rerun_output, rerun_output


@pytest.mark.parametrize("keeper", [
    pytest.param({}, id="fixed"),
    # Makes a tank's ready record 3 s after the tank, and follows a changed image 3 s after
    # the change: a tank made by changes, older, has its record when one made directly has
    # not yet, and a change looks settled before its config moved.  Compared at the same
    # age, and each change judged again on what the tank came to: no finding.
    pytest.param({"TANK_PACE": "3"}, id="paced"),
    # Sends its configs back unchanged every 0.1 s: writes that store nothing, which a
    # settle counting them never sees end ("never settled ... kept writing").
    pytest.param({"TANK_RESYNC": "1"}, id="resyncing"),
])
def test_the_fixed_tank_keeper_gives_no_finding(planted: Any, tmp_path: Path,  # noqa: F811
                                                monkeypatch: pytest.MonkeyPatch,
                                                keeper: dict[str, str]) -> None:
    monkeypatch.delenv("TANK_BUG", raising=False)
    for name, value in keeper.items():
        monkeypatch.setenv(name, value)
    result, output, summary = explore(planted, tmp_path, "-".join(keeper) or "fixed",
                                      "--envtest-explore=operations", "scenario_tanks.py")
    result.assert_outcomes(passed=1)
    assert findings(summary) == [], output
    (outcome,) = summary["tests"][0]["outcomes"]
    assert outcome["verdict"] == "passed" and outcome["trials"] >= 8, outcome
    assert outcome["refused"] < outcome["trials"], outcome


FIELDS_ONLY = """
import pytest
from scenario_tanks import pytestmark  # noqa: F401 (the Tank's CRD)
from scenario_tanks import test_a_tank_gets_its_parts_and_config as made

test_image_and_mode_only = pytest.mark.envtest_explore(
    "operations", fields=["spec.image", "spec.mode"])(made)
"""


def test_fields_given_are_the_only_ones_changed(planted: Any, tmp_path: Path,  # noqa: F811
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``envtest_explore(fields=[...])`` keeps the changes to those fields: the tank keeper
    that loops on ``size: 0`` is never shown a size, so its whole budget passes."""
    monkeypatch.setenv("TANK_BUG", "zero-size")
    planted.makepyfile(scenario_fields=FIELDS_ONLY)
    result, output, summary = explore(planted, tmp_path, "fields", "scenario_fields.py")
    result.assert_outcomes(passed=1)
    assert findings(summary) == [], output
    (outcome,) = summary["tests"][0]["outcomes"]
    # The edge of the two fields (mode: safe), then eight examples drawn from them: a
    # sequence drawn twice runs once, and each run draws with a seed of its own, so some
    # runs ran 7 of the 8.
    assert outcome["verdict"] == "passed" and outcome["trials"] >= 7, outcome


def test_fields_that_are_not_the_specs_fail_the_test_with_the_fix(
        planted: Any) -> None:  # noqa: F811
    planted.makepyfile(scenario_bad=FIELDS_ONLY.replace('"spec.image"', '"image"'))
    result = planted.runpytest_subprocess("-p", "no:cacheprovider", "scenario_bad.py",
                                          timeout=120)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fields= takes patterns of the spec's fields that "
                                 "operations change, each starting with 'spec.'*"])
