"""Structured logging: every reconcile line names its controller and ``key=namespace/name``.

The fields go both into the message text (so any handler, pytest's caplog included, shows them)
and onto the record as attributes (so the JSON formatter can emit them as fields).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any


class KeyLogger(logging.LoggerAdapter):  # type: ignore[type-arg,unused-ignore]
    def __init__(self, logger: logging.Logger, controller: str, key: str) -> None:
        super().__init__(logger, {"controller": controller, "key": key})

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        assert self.extra is not None
        extra = dict(kwargs.get("extra") or {})
        extra.update(self.extra)
        kwargs["extra"] = extra
        return f"{msg} controller={self.extra['controller']} key={self.extra['key']}", kwargs


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in ("controller", "key"):
            if hasattr(record, field):
                entry[field] = getattr(record, field)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Used by the CLI only: an in-process operator leaves logging to its host."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s %(message)s"))
    root = logging.getLogger("ray_operator")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
