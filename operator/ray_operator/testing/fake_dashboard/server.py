"""``FakeRayDashboard``: a real HTTP server on 127.0.0.1 serving the fake Serve and Jobs APIs.

Its port is bound at construction but not listened on until ``start()``: on Linux a bound,
non-listening TCP socket answers connection attempts with a reset, so clients get "connection
refused" exactly as from a head whose Dashboard has not started, and the port is known (and kept)
up front. ``refuse()`` goes back to that state, ``stop()`` releases the port.

This module is the server's side only: lifecycle, injected faults (errors, slowness), the
journal of every request answered, and dispatch to the APIs (``serve_api``, ``jobs_api``), whose
state the test reads and sets through the methods here.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from .api import Answer, Api, BadRequest, parse_body
from .jobs_api import JobsApi
from .serve_api import ServeApi, ServePolicy


@dataclass(frozen=True)
class JournalEntry:
    seq: int
    """1, 2, ... in answer order over the dashboard's life (not reset by ``clear_journal``)."""
    monotonic: float
    wall: float
    method: str
    path: str
    query: str
    body: Any
    """Parsed JSON body; the raw text when it was not JSON; None when empty."""
    status: int


class FakeRayDashboard:
    def __init__(
        self,
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        name: str = "",
        serve_policy: ServePolicy | None = None,
    ) -> None:
        self.host = host
        self.name = name
        self._serve = ServeApi(serve_policy or ServePolicy())
        self._jobs = JobsApi()
        self._apis: tuple[Api, ...] = (self._serve, self._jobs)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._closing = threading.Event()
        self._sock: socket.socket | None = self._bind(port)
        self.port: int = self._sock.getsockname()[1]
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._journal: list[JournalEntry] = []
        self._seq = 0
        self._fault: tuple[int, int | None, str] | None = None
        self._delay = 0.0
        self.transitions: list[tuple[float, str]] = []
        """(monotonic time, "started" | "refusing" | "stopped"), for timelines."""

    # ------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def serving(self) -> bool:
        with self._lock:
            return self._server is not None

    def start(self) -> FakeRayDashboard:
        """Listen and answer (idempotent)."""
        with self._lock:
            if self._closing.is_set():
                raise RuntimeError("this FakeRayDashboard was stopped; create a new one")
            if self._server is not None:
                return self
            sock = self._sock if self._sock is not None else self._bind(self.port)
            server = _Server(self)
            server.socket.close()
            server.socket = sock
            server.server_address = sock.getsockname()
            server.server_activate()
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"fake-dashboard-{self.name or self.port}",
                daemon=True,
            )
            thread.start()
            self._server, self._thread, self._sock = server, thread, None
            self.transitions.append((time.monotonic(), "started"))
        return self

    def refuse(self) -> None:
        """Stop answering: connections are refused again; the port stays reserved."""
        with self._lock:
            self._close_server()
            if not self._closing.is_set() and self._sock is None:
                self._sock = self._bind(self.port)
            self.transitions.append((time.monotonic(), "refusing"))

    def stop(self) -> None:
        with self._lock:
            self._closing.set()
            self._close_server()
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            self.transitions.append((time.monotonic(), "stopped"))
            self._cond.notify_all()

    def __enter__(self) -> FakeRayDashboard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _close_server(self) -> None:
        if self._server is None:
            return
        server, thread = self._server, self._thread
        self._server = self._thread = None
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()

    def _bind(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, port))
        except OSError:
            sock.close()
            raise
        return sock

    # ---------------------------------------------------------------- faults

    def fail_with(self, status: int = 500, count: int | None = None, body: str = "") -> None:
        """Answer the next ``count`` requests (all when None) with ``status``."""
        with self._lock:
            self._fault = (status, count, body or f"injected failure {status}")

    def set_delay(self, seconds: float) -> None:
        """Wait this long before answering each request (a slow or overloaded head)."""
        with self._lock:
            self._delay = seconds

    def clear_faults(self) -> None:
        with self._lock:
            self._fault = None
            self._delay = 0.0

    # ------------------------------------------------- Serve state (serve_api)

    @property
    def serve_policy(self) -> ServePolicy:
        """How applications behave after submission; may be replaced at any time."""
        return self._serve.policy

    @serve_policy.setter
    def serve_policy(self, policy: ServePolicy) -> None:
        self._serve.policy = policy

    @property
    def serve_config(self) -> dict[str, Any] | None:
        """The last accepted multi-application config."""
        return self._serve.config

    def applications(self) -> dict[str, Any]:
        """What ``GET /api/serve/applications/`` answers with now, ``applications`` part."""
        return self._serve.applications()

    def set_app_status(self, app: str, status: str, message: str = "") -> None:
        self._serve.set_app_status(app, status, message)

    def set_deployment_status(
        self, app: str, deployment: str, status: str, message: str = ""
    ) -> None:
        self._serve.set_deployment_status(app, deployment, status, message)

    def set_serve_statuses(
        self, app_status: str | None = None, deployment_status: str | None = None, message: str = ""
    ) -> None:
        """Fix every current application's (and/or deployment's) status."""
        self._serve.set_statuses(app_status, deployment_status, message)

    # --------------------------------------------------- Jobs state (jobs_api)

    def jobs(self) -> dict[str, dict[str, Any]]:
        return self._jobs.jobs()

    def job(self, job_id: str) -> dict[str, Any]:
        return self._jobs.job(job_id)

    def set_job_status(self, job_id: str, status: str, message: str = "") -> None:
        self._jobs.set_job_status(job_id, status, message)

    # --------------------------------------------------------------- journal

    @property
    def journal(self) -> list[JournalEntry]:
        with self._lock:
            return list(self._journal)

    def requests(
        self, method: str | None = None, path_prefix: str | None = None
    ) -> list[JournalEntry]:
        with self._lock:
            return [e for e in self._journal if _matches(e, method, path_prefix)]

    def wait_for_request(
        self,
        method: str | None = None,
        path_prefix: str | None = None,
        *,
        count: int = 1,
        timeout: float = 10.0,
    ) -> list[JournalEntry]:
        """Block until ``count`` matching requests have been answered; returns the first
        ``count`` of them. Raises TimeoutError naming what was seen instead."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self._journal if _matches(e, method, path_prefix)]
                if len(found) >= count:
                    return found[:count]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closing.is_set():
                    seen = ", ".join(f"{e.method} {e.path}" for e in self._journal) or "nothing"
                    raise TimeoutError(
                        f"{self.name or self.url}: wanted {count} x {method or '*'} "
                        f"{path_prefix or '*'} within {timeout}s; got: {seen}"
                    )
                self._cond.wait(remaining)

    def clear_journal(self) -> None:
        with self._lock:
            self._journal.clear()

    # -------------------------------------------------------------- requests

    def _handle(self, method: str, target: str, raw: bytes) -> Answer:
        """One request, from the handler thread: delay, answer, then journal it."""
        with self._lock:
            delay = self._delay
        if delay:
            self._closing.wait(delay)
        parts = urlsplit(target)
        body = parse_body(raw)
        status, payload = self._answer(method, parts.path, body)
        with self._cond:
            self._seq += 1
            self._journal.append(
                JournalEntry(
                    seq=self._seq,
                    monotonic=time.monotonic(),
                    wall=time.time(),
                    method=method,
                    path=parts.path,
                    query=parts.query,
                    body=body,
                    status=status,
                )
            )
            self._cond.notify_all()
        return status, payload

    def _answer(self, method: str, path: str, body: Any) -> Answer:
        """An injected fault if any, else the first API that knows the route, else 404."""
        with self._lock:
            if self._fault is not None:
                status, count, text = self._fault
                if count is not None:
                    self._fault = (status, count - 1, text) if count > 1 else None
                return status, text
        route = path if path.endswith("/") else path + "/"
        try:
            for api in self._apis:
                answer = api.answer(method, route, body)
                if answer is not None:
                    return answer
        except BadRequest as exc:
            return 400, str(exc)
        return 404, f"{method} {path}: not found"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, payload = self.server.dashboard._handle(self.command, self.path, raw)
        if isinstance(payload, str):
            data, content_type = payload.encode(), "text/plain; charset=utf-8"
        else:
            data, content_type = json.dumps(payload).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the journal is the record."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, dashboard: FakeRayDashboard) -> None:
        super().__init__((dashboard.host, 0), _Handler, bind_and_activate=False)
        self.dashboard = dashboard

    def handle_error(self, request: Any, client_address: Any) -> None:
        # An operator that times out or stops hangs up mid-answer: normal, not a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _matches(entry: JournalEntry, method: str | None, path_prefix: str | None) -> bool:
    return (method is None or entry.method == method.upper()) and (
        path_prefix is None or entry.path.startswith(path_prefix)
    )
