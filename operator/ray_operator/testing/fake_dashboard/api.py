"""What the fake Dashboard's HTTP server and the APIs it serves agree on.

The server parses each body once (``parse_body``) and offers the request to each API in turn;
an API answers ``(status, payload)`` for its routes and ``None`` for any other, and raises
``BadRequest`` for a malformed body, which the server turns into a 400 as Ray does.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

Answer = tuple[int, Any]
"""HTTP status and payload: a ``str`` is sent as text, anything else as JSON."""


class Api(Protocol):
    def answer(self, method: str, route: str, body: Any) -> Answer | None:
        """``route`` is the request path with a trailing slash; None: not one of its routes."""


class BadRequest(Exception):
    """Answered with 400 and the message as text."""


class Unparsed(str):
    """A body that was not JSON (kept as text in the journal)."""


def parse_body(raw: bytes) -> Any:
    """The JSON body, ``Unparsed`` text when it is not JSON, None when empty."""
    if not raw:
        return None
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return Unparsed(text)


def require_json(body: Any) -> Any:
    if body is None:
        raise BadRequest("Request body is empty; expected JSON")
    if isinstance(body, Unparsed):
        raise BadRequest(f"Request body is not valid JSON: {body[:80]!r}")
    return body
