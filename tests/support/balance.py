"""The long tests spread over pytest-xdist's workers, at the front of each one's share.

Kept apart from ``tests/conftest.py`` (which only reads the durations and calls it) so that
the arithmetic is tested on its own: how worksteal cuts the collection into shares at the
start (``len(pending) // nodes_left`` in turn, front to back) is mirrored here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A unit of this many seconds or more is placed; shorter ones keep their order.
LONG_SECONDS = 4.0


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

    The long units go longest first to the share with the least long work so far (and
    room left for their tests); every share starts with its long units, longest first,
    followed by the short ones in their collection order, as many as fill it.
    """
    sizes = share_sizes(sum(len(unit.items) for unit in units), workers)
    long_units = sorted((u for u in units if u.seconds >= LONG_SECONDS),
                        key=lambda u: -u.seconds)
    placed: list[list[Unit]] = [[] for _ in sizes]
    load = [0.0] * len(sizes)
    room = list(sizes)
    for unit in long_units:
        fits = [i for i in range(len(sizes)) if room[i] >= len(unit.items)]
        if not fits:
            break  # never with this suite's handful of long tests; the rest stay short
        share = min(fits, key=lambda i: (load[i], i))
        placed[share].append(unit)
        load[share] += unit.seconds
        room[share] -= len(unit.items)
    chosen = {id(unit) for share in placed for unit in share}
    short = iter(item for unit in units if id(unit) not in chosen for item in unit.items)
    ordered: list[Any] = []
    for share, units_of_share in enumerate(placed):
        ordered.extend(item for unit in units_of_share for item in unit.items)
        ordered.extend(next(short) for _ in range(room[share]))
    return ordered
