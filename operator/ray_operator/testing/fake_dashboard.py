"""A fake Ray Dashboard that is a real HTTP server on 127.0.0.1.

Its port is bound at construction but not listened on until ``start()``: on Linux a bound,
non-listening TCP socket answers connection attempts with a reset, so clients get "connection
refused" exactly as from a head whose Dashboard has not started, and the port is known (and kept)
up front. ``refuse()`` goes back to that state, ``stop()`` releases the port.

It serves the Serve multi-application API and the Jobs API with states the test controls,
rejects malformed bodies with 400 like Ray, can answer with errors or slowly, and journals every
request it answers so a test can assert which calls were made, when, and with what.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

APP_STATUSES = frozenset({"NOT_STARTED", "DEPLOYING", "RUNNING", "DEPLOY_FAILED", "UNHEALTHY"})
DEPLOYMENT_STATUSES = frozenset({"UPDATING", "HEALTHY", "UNHEALTHY"})
JOB_STATUSES = frozenset({"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"})
JOB_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})

SERVE_PATH = "/api/serve/applications/"
JOBS_PATH = "/api/jobs/"


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


@dataclass(frozen=True)
class ServePolicy:
    """What a newly submitted application reports: ``initial_*`` statuses for
    ``ready_after_seconds`` after submission, then the final ones. The default is ready at once."""

    app_status: str = "RUNNING"
    deployment_status: str = "HEALTHY"
    initial_app_status: str = "DEPLOYING"
    initial_deployment_status: str = "UPDATING"
    ready_after_seconds: float = 0.0


@dataclass
class _Deployment:
    status: str | None = None
    """None: follow the policy; set by the test: fixed."""
    message: str = ""


@dataclass
class _App:
    config: dict[str, Any]
    submitted_at: float
    status: str | None = None
    message: str = ""
    deployments: dict[str, _Deployment] = field(default_factory=dict)


class _BadRequest(Exception):
    pass


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
        self.serve_policy = serve_policy or ServePolicy()
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._closing = threading.Event()
        self._sock: socket.socket | None = self._bind(port)
        self.port: int = self._sock.getsockname()[1]
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._journal: list[JournalEntry] = []
        self._seq = 0
        self._apps: dict[str, _App] = {}
        self._serve_config: dict[str, Any] | None = None
        self._jobs: dict[str, dict[str, Any]] = {}
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

    # ----------------------------------------------------------------- Serve

    @property
    def serve_config(self) -> dict[str, Any] | None:
        """The last accepted multi-application config."""
        with self._lock:
            return json.loads(json.dumps(self._serve_config)) if self._serve_config else None

    def applications(self) -> dict[str, Any]:
        """What ``GET /api/serve/applications/`` answers with now, ``applications`` part."""
        with self._lock:
            now = time.monotonic()
            return {name: self._app_details(name, app, now) for name, app in self._apps.items()}

    def set_app_status(self, app: str, status: str, message: str = "") -> None:
        if status not in APP_STATUSES:
            raise ValueError(f"app status must be one of {sorted(APP_STATUSES)}")
        with self._lock:
            target = self._app(app)
            target.status, target.message = status, message

    def set_deployment_status(
        self, app: str, deployment: str, status: str, message: str = ""
    ) -> None:
        if status not in DEPLOYMENT_STATUSES:
            raise ValueError(f"deployment status must be one of {sorted(DEPLOYMENT_STATUSES)}")
        with self._lock:
            target = self._app(app).deployments.setdefault(deployment, _Deployment())
            target.status, target.message = status, message

    def set_serve_statuses(
        self, app_status: str | None = None, deployment_status: str | None = None, message: str = ""
    ) -> None:
        """Fix every current application's (and/or deployment's) status."""
        with self._lock:
            for name, app in self._apps.items():
                if app_status is not None:
                    self.set_app_status(name, app_status, message)
                if deployment_status is not None:
                    for dep in app.deployments:
                        self.set_deployment_status(name, dep, deployment_status, message)

    def _app(self, name: str) -> _App:
        if name not in self._apps:
            raise KeyError(f"no Serve application {name!r}; known: {sorted(self._apps)}")
        return self._apps[name]

    def _app_details(self, name: str, app: _App, now: float) -> dict[str, Any]:
        policy = self.serve_policy
        settled = now - app.submitted_at >= policy.ready_after_seconds
        app_status = app.status or (policy.app_status if settled else policy.initial_app_status)
        deployments = {}
        for dep_name, dep in app.deployments.items():
            dep_status = dep.status or (
                policy.deployment_status if settled else policy.initial_deployment_status
            )
            deployments[dep_name] = {
                "name": dep_name,
                "status": dep_status,
                "message": dep.message,
                "replicas": [],
            }
        return {
            "name": name,
            "route_prefix": app.config.get("route_prefix", "/"),
            "docs_path": None,
            "status": app_status,
            "message": app.message,
            "last_deployed_time_s": app.submitted_at,
            "deployed_app_config": app.config,
            "deployments": deployments,
        }

    def _put_serve(self, body: Any) -> tuple[int, Any]:
        config = _validate_serve_config(body)
        with self._lock:
            now = time.monotonic()
            fresh: dict[str, _App] = {}
            for app_config in config["applications"]:
                name = app_config.get("name", "default")
                current = self._apps.get(name)
                if current is not None and current.config == app_config:
                    fresh[name] = current  # unchanged app: Ray keeps it as it is
                    continue
                fresh[name] = _App(
                    config=app_config,
                    submitted_at=now,
                    deployments={
                        d["name"]: _Deployment() for d in app_config.get("deployments") or []
                    },
                )
            self._apps = fresh
            self._serve_config = config
        return 200, {}

    def _get_serve(self) -> tuple[int, Any]:
        return 200, {
            "controller_info": {"node_id": "fake", "actor_id": "fake"},
            "proxy_location": "EveryNode",
            "http_options": {"host": "0.0.0.0", "port": 8000},
            "deploy_mode": "MULTI_APP",
            "applications": self.applications(),
        }

    # ------------------------------------------------------------------ Jobs

    def jobs(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return json.loads(json.dumps(self._jobs))

    def job(self, job_id: str) -> dict[str, Any]:
        with self._lock:
            if job_id not in self._jobs:
                raise KeyError(f"no job {job_id!r}; known: {sorted(self._jobs)}")
            return dict(self._jobs[job_id])

    def set_job_status(self, job_id: str, status: str, message: str = "") -> None:
        if status not in JOB_STATUSES:
            raise ValueError(f"job status must be one of {sorted(JOB_STATUSES)}")
        with self._lock:
            if job_id not in self._jobs:
                raise KeyError(f"no job {job_id!r}; known: {sorted(self._jobs)}")
            job = self._jobs[job_id]
            job["status"], job["message"] = status, message
            if status in JOB_TERMINAL and not job.get("end_time"):
                job["end_time"] = int(time.time() * 1000)

    def _submit_job(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict):
            raise _BadRequest("JobSubmitRequest must be a JSON object")
        entrypoint = body.get("entrypoint")
        if not isinstance(entrypoint, str) or not entrypoint:
            raise _BadRequest("JobSubmitRequest failed validation: 'entrypoint' must be a string")
        submission_id, legacy_id = body.get("submission_id"), body.get("job_id")
        if submission_id and legacy_id and submission_id != legacy_id:
            raise _BadRequest("job_id and submission_id must match when both are given")
        job_id = str(submission_id or legacy_id or f"raysubmit_{uuid.uuid4().hex[:16]}")
        for key in ("runtime_env", "metadata"):
            if body.get(key) is not None and not isinstance(body[key], dict):
                raise _BadRequest(f"JobSubmitRequest failed validation: '{key}' must be an object")
        with self._lock:
            if job_id in self._jobs:
                raise _BadRequest(
                    f"Job with submission_id {job_id} already exists. "
                    "Please use a different submission_id."
                )
            self._jobs[job_id] = {
                "type": "SUBMISSION",
                "job_id": job_id,
                "submission_id": job_id,
                "driver_info": None,
                "status": "PENDING",
                "entrypoint": entrypoint,
                "message": "Job has not started yet.",
                "error_type": None,
                "start_time": int(time.time() * 1000),
                "end_time": None,
                "metadata": body.get("metadata") or {},
                "runtime_env": body.get("runtime_env") or {},
            }
        return 200, {"job_id": job_id, "submission_id": job_id}

    def _get_job(self, job_id: str) -> tuple[int, Any]:
        with self._lock:
            if job_id not in self._jobs:
                return 404, f"Job {job_id} does not exist"
            return 200, dict(self._jobs[job_id])

    def _stop_job(self, job_id: str) -> tuple[int, Any]:
        with self._lock:
            if job_id not in self._jobs:
                return 404, f"Job {job_id} does not exist"
            job = self._jobs[job_id]
            if job["status"] in JOB_TERMINAL:
                return 200, {"stopped": False}
            self.set_job_status(job_id, "STOPPED", "Job was intentionally stopped.")
            return 200, {"stopped": True}

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

    def _handle(self, method: str, target: str, raw: bytes) -> tuple[int, Any]:
        with self._lock:
            delay = self._delay
        if delay:
            self._closing.wait(delay)
        parts = urlsplit(target)
        body = _parse_body(raw)
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

    def _answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        with self._lock:
            if self._fault is not None:
                status, count, text = self._fault
                if count is not None:
                    self._fault = (status, count - 1, text) if count > 1 else None
                return status, text
        route = path if path.endswith("/") else path + "/"
        try:
            if route == SERVE_PATH and method == "PUT":
                return self._put_serve(_require_json(body))
            if route == SERVE_PATH and method == "GET":
                return self._get_serve()
            if route == JOBS_PATH and method == "POST":
                return self._submit_job(_require_json(body))
            if route == JOBS_PATH and method == "GET":
                return 200, list(self.jobs().values())
            if route.startswith(JOBS_PATH):
                rest = route[len(JOBS_PATH) :].strip("/").split("/")
                if len(rest) == 1 and method == "GET":
                    return self._get_job(rest[0])
                if len(rest) == 2 and rest[1] == "stop" and method == "POST":
                    return self._stop_job(rest[0])
        except _BadRequest as exc:
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


def _matches(entry: JournalEntry, method: str | None, path_prefix: str | None) -> bool:
    return (method is None or entry.method == method.upper()) and (
        path_prefix is None or entry.path.startswith(path_prefix)
    )


def _parse_body(raw: bytes) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return _Unparsed(text)


class _Unparsed(str):
    """A body that was not JSON (kept as text in the journal)."""


def _require_json(body: Any) -> Any:
    if body is None:
        raise _BadRequest("Request body is empty; expected JSON")
    if isinstance(body, _Unparsed):
        raise _BadRequest(f"Request body is not valid JSON: {body[:80]!r}")
    return body


def _validate_serve_config(body: Any) -> dict[str, Any]:
    """The checks Ray's ServeDeploySchema makes that a client can get wrong."""
    if not isinstance(body, dict):
        raise _BadRequest("1 validation error for ServeDeploySchema\n  value is not a valid dict")
    apps = body.get("applications")
    if not isinstance(apps, list):
        problem = "field required" if apps is None else "value is not a valid list"
        raise _BadRequest(f"1 validation error for ServeDeploySchema\napplications\n  {problem}")
    names: set[str] = set()
    prefixes: set[str] = set()
    for index, app in enumerate(apps):
        where = f"applications -> {index}"
        if not isinstance(app, dict):
            raise _BadRequest(f"1 validation error for ServeDeploySchema\n{where}\n  not a dict")
        if not isinstance(app.get("import_path"), str) or not app["import_path"]:
            raise _BadRequest(
                f"1 validation error for ServeDeploySchema\n{where} -> import_path\n"
                "  field required"
            )
        name = app.get("name", "default")
        prefix = app.get("route_prefix", "/")
        if name in names:
            raise _BadRequest(f"Found multiple configs for application {name}.")
        if prefix is not None:
            if not isinstance(prefix, str) or not prefix.startswith("/"):
                raise _BadRequest(f'route_prefix "{prefix}" must start with "/"')
            if prefix in prefixes:
                raise _BadRequest(f'Found duplicate route prefix "{prefix}".')
            prefixes.add(prefix)
        names.add(name)
        for dep_index, dep in enumerate(app.get("deployments") or []):
            if not isinstance(dep, dict) or not isinstance(dep.get("name"), str):
                raise _BadRequest(
                    f"1 validation error for ServeDeploySchema\n{where} -> deployments -> "
                    f"{dep_index} -> name\n  field required"
                )
    return body
