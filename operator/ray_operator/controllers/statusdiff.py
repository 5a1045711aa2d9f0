"""Whether a status changed in anything but its timestamps.

Every controller writes status only when this says so: a write that changes only
``lastUpdateTime`` and friends is noise that costs an API call and wakes every watcher.
"""

from __future__ import annotations

from typing import Any

TIMESTAMP_FIELDS = frozenset({"lastUpdateTime", "healthLastUpdateTime", "lastTransitionTime"})


def without_timestamps(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timestamps(v) for k, v in value.items() if k not in TIMESTAMP_FIELDS}
    if isinstance(value, list):
        return [without_timestamps(v) for v in value]
    return value


def _normalized(status: dict[str, Any] | None) -> Any:
    """Absent, None and empty containers mean the same to a reader of status."""

    def prune(value: Any) -> Any:
        if isinstance(value, dict):
            pruned = {k: prune(v) for k, v in value.items()}
            return {k: v for k, v in pruned.items() if v not in (None, {}, [], "")}
        if isinstance(value, list):
            return [prune(v) for v in value]
        return value

    return prune(without_timestamps(status or {}))


def status_changed(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    return _normalized(old) != _normalized(new)
