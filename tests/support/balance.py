"""The long tests spread over pytest-xdist's workers, at the front of each one's share.

Kept apart from ``tests/conftest.py`` (which only reads the durations and calls it) so that
the arithmetic is tested on its own: how worksteal cuts the collection into shares at the
start (``len(pending) // nodes_left`` in turn, front to back) is mirrored here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A unit of this many seconds or more is placed first; shorter ones go a file at a time.
LONG_SECONDS = 4.0
#: What a test counts for when it is not in the durations (those under a second are not).
SHORT_SECONDS = 0.2


@dataclass
class Unit:
    """Tests that go to one worker together, with the seconds they took last time."""

    key: str
    items: list[Any] = field(default_factory=list)
    seconds: float = 0.0


def reorder(items: list[Any], seconds: dict[str, float], workers: int,
            together: Callable[[Any], str | None] = lambda item: None) -> list[Any]:
    """``items`` (pytest items) reordered for ``workers`` by last run's ``seconds`` per node
    id; the items for which ``together`` gives one key stay one unit."""
    units: dict[str, Unit] = {}
    for item in items:
        key = together(item) or item.nodeid
        unit = units.setdefault(key, Unit(key))
        unit.items.append(item)
        unit.seconds += seconds.get(item.nodeid, 0.0)
    return order_for_workers(list(units.values()), workers)


def share_sizes(count: int, workers: int) -> list[int]:
    """How many of ``count`` tests each worker is handed first (xdist's worksteal)."""
    sizes = []
    for left in range(workers, 0, -1):
        sizes.append(count // left)
        count -= sizes[-1]
    return sizes


def order_for_workers(units: list[Unit], workers: int) -> list[Any]:
    """The items of ``units`` (in collection order) reordered for ``workers`` workers.

    The long units go longest first to the share with the least work so far (and room
    left for their tests).  The short ones, a test file's at a time (its module-scoped
    fixtures set up once), then go most work first to the share with the least, as
    many tests as it has room for, a file split only where no share has room for all of
    it.  Every share starts with its long units, longest first, then its short tests in
    their collection order.
    """
    sizes = share_sizes(sum(len(unit.items) for unit in units), workers)
    load = [0.0] * len(sizes)
    room = list(sizes)
    long_of: list[list[Unit]] = [[] for _ in sizes]
    for unit in sorted((u for u in units if u.seconds >= LONG_SECONDS),
                       key=lambda u: -u.seconds):
        fits = [i for i in range(len(sizes)) if room[i] >= len(unit.items)]
        if not fits:
            break  # never with this suite's handful of long tests; the rest count as short
        share = min(fits, key=lambda i: (load[i], i))
        long_of[share].append(unit)
        load[share] += unit.seconds
        room[share] -= len(unit.items)
    placed = {id(unit) for share in long_of for unit in share}
    # The short tests by file, in collection order: (position, seconds, items).
    files: dict[str, list[tuple[int, float, Any]]] = {}
    for position, unit in enumerate(u for u in units if id(u) not in placed):
        seconds = max(unit.seconds, SHORT_SECONDS * len(unit.items))
        file = unit.key.split("::")[0]
        files.setdefault(file, []).extend(
            (position, seconds / len(unit.items), item) for item in unit.items)
    short_of: list[list[tuple[int, float, Any]]] = [[] for _ in sizes]
    for tests in sorted(files.values(), key=lambda t: -sum(s for _, s, _ in t)):
        while tests:
            whole = [i for i in range(len(sizes)) if room[i] >= len(tests)]
            share = min(whole or [i for i in range(len(sizes)) if room[i]],
                        key=lambda i: (load[i], i))
            taken, tests = tests[:room[share]], tests[room[share]:]
            short_of[share] += taken
            load[share] += sum(seconds for _, seconds, _ in taken)
            room[share] -= len(taken)
    ordered: list[Any] = []
    for share in range(len(sizes)):
        ordered.extend(item for unit in long_of[share] for item in unit.items)
        ordered.extend(item for _, _, item in sorted(short_of[share], key=lambda t: t[0]))
    return ordered
