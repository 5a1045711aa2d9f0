"""RFC 3339 timestamps as Kubernetes writes them (second precision, UTC, ``Z``)."""

from __future__ import annotations

from datetime import UTC, datetime


def now_rfc3339() -> str:
    return format_rfc3339(datetime.now(UTC))


def format_rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def from_epoch_ms(value: int | None) -> str | None:
    if not value:
        return None
    return format_rfc3339(datetime.fromtimestamp(value / 1000.0, UTC))


def seconds_since(value: str | None, now: datetime | None = None) -> float | None:
    moment = parse_rfc3339(value)
    if moment is None:
        return None
    return ((now or datetime.now(UTC)) - moment).total_seconds()
