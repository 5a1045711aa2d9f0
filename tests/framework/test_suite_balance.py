"""The suite's own layout over xdist workers (``tests/conftest.py``): the long tests lead
every worker's share, and the tests of a group start one worker's share together, under real
pytest-xdist (worksteal never takes the first two tests of a share: a group of more may be
split, which ``tests/docs/test_examples.py`` survives by sharing its run between workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.balance import LONG_SECONDS, Unit, order_for_workers, share_sizes

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]

_INNER_CONFTEST = """
import os
from tests.support.balance import reorder

SECONDS = {"test_order.py::test_group[0]": 20.0, "test_order.py::test_long[0]": 10.0,
           "test_order.py::test_long[1]": 9.0, "test_order.py::test_long[2]": 8.0}

def pytest_collection_modifyitems(items):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1 and os.environ.get("BALANCE") == "1":
        items[:] = reorder(items, SECONDS, workers,
                           lambda item: "group" if "::test_group[" in item.nodeid else None)
"""

_INNER_TESTS = """
import os
import pytest

def _ran(name):
    with open(os.environ["ORDER_LOG"], "a") as log:
        log.write(f"{os.environ['PYTEST_XDIST_WORKER']} {name}\\n")

@pytest.mark.parametrize("n", range(27))
def test_short(n):
    _ran(f"short{n}")

@pytest.mark.parametrize("n", range(3))
def test_long(n):
    _ran(f"long{n}")

@pytest.mark.parametrize("n", range(2))
def test_group(n):
    _ran(f"group{n}")
"""


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
         balance: bool) -> dict[str, list[str]]:
    pytester.makeconftest(_INNER_CONFTEST)
    pytester.makepyfile(test_order=_INNER_TESTS)
    log = pytester.path / "order.log"
    monkeypatch.setenv("ORDER_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("BALANCE", "1" if balance else "0")
    for variable in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(variable, raising=False)
    result = pytester.runpytest_subprocess("-n", "3", "--dist", "worksteal", "-p", "no:envtest",
                                           "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=32)
    ran: dict[str, list[str]] = {}
    for line in log.read_text().splitlines():
        worker, name = line.split()
        ran.setdefault(worker, []).append(name)
    return ran


def test_each_worker_starts_with_a_long_test_and_a_group_stays_on_one(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _run(pytester, monkeypatch, balance=True)
    assert len(ran) == 3, ran
    assert {names[0][:-1] for names in ran.values()} <= {"long", "group"}, ran
    group_workers = {w for w, names in ran.items() if any(n.startswith("group") for n in names)}
    assert len(group_workers) == 1, ran
    (group_worker,) = group_workers
    assert ran[group_worker][:2] == ["group0", "group1"], ran
    long_workers = {w for w, names in ran.items() if any(n.startswith("long") for n in names)}
    assert len(long_workers) == 2 and group_worker not in long_workers, ran


def test_in_collection_order_no_worker_starts_with_a_long_test(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the reordering is for: unbalanced, the long tests are all in the last share,
    behind short ones, and no worker starts with one."""
    ran = _run(pytester, monkeypatch, balance=False)
    assert all(names[0].startswith("short") for names in ran.values()), ran


def test_share_sizes_are_xdists_first_hand_out() -> None:
    assert share_sizes(10, 3) == [3, 3, 4]
    assert share_sizes(757, 3) == [252, 252, 253]
    assert share_sizes(2, 3) == [0, 1, 1]


def test_every_item_is_kept_once_and_the_long_ones_lead_the_least_loaded_shares() -> None:
    units = [Unit(f"t{i}", [f"t{i}"], seconds) for i, seconds in
             enumerate([0.1, 30.0, 0.2, 0.3, LONG_SECONDS, 12.0, 0.4, 0.5, 25.0, 0.6])]
    ordered = order_for_workers(units, 3)
    assert sorted(ordered) == sorted(u.key for u in units)
    shares = [ordered[:3], ordered[3:6], ordered[6:]]
    assert [share[0] for share in shares] == ["t1", "t8", "t5"]  # longest to least loaded
    assert shares[2][:2] == ["t5", "t4"]  # 12 s + 4 s: the least loaded again
    short = [key for key in ordered if key in {"t0", "t2", "t3", "t6", "t7", "t9"}]
    assert short == ["t0", "t2", "t3", "t6", "t7", "t9"]


def test_short_tests_go_a_file_at_a_time_to_the_least_loaded_share() -> None:
    seconds = {"a": 1.0, "b": 0.0, "c": 2.0}  # b's are missing from the durations: 0.2 s
    units = [Unit(f"{f}.py::{f}{n}", [f"{f}{n}"], seconds[f])
             for f, count in (("a", 3), ("b", 3), ("c", 2)) for n in range(1, count + 1)]
    ordered = order_for_workers(units, 2)
    # c (4 s) to the first share, a (3 s) whole to the second, b split where room is left;
    # each share in collection order.
    assert [ordered[:4], ordered[4:]] == [["b2", "b3", "c1", "c2"], ["a1", "a2", "a3", "b1"]]
