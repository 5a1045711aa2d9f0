"""Client of the Ray Dashboard HTTP API: Serve multi-application API and Jobs API.

Errors come in distinct classes because the controllers react differently: an unreachable
Dashboard is the normal state of a head that is still starting, an HTTP error status is the
Dashboard refusing a request (e.g. a job id already taken), invalid JSON is a broken answer.

The base URL comes from a ``DashboardResolver`` so that a test, where no cluster DNS exists, can
route each RayCluster to a local server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from .constants import DEFAULT_HEAD_PORTS

DashboardResolver = Callable[[str, str, str], str]
"""``resolver(namespace, raycluster_name, head_service_name) -> base URL``."""


def default_dashboard_resolver(namespace: str, raycluster_name: str, head_service_name: str) -> str:
    """The head Service's cluster DNS name, as KubeRay addresses the Dashboard."""
    return f"http://{head_service_name}.{namespace}.svc.cluster.local:{DEFAULT_HEAD_PORTS['dashboard']}"


class DashboardError(Exception):
    def __init__(self, message: str, url: str) -> None:
        super().__init__(message)
        self.url = url


class DashboardUnreachable(DashboardError):
    """Connection refused, no route, name not resolved, connection reset, or no address known."""


class DashboardTimeout(DashboardUnreachable):
    """Connected (or tried to) but no answer in time."""


class DashboardHTTPError(DashboardError):
    def __init__(self, message: str, url: str, status_code: int, body: str) -> None:
        super().__init__(message, url)
        self.status_code = status_code
        self.body = body


class JobAlreadyExists(DashboardHTTPError):
    """The Jobs API already has a job with this submission id (submitting it is then done)."""


class DashboardInvalidJSON(DashboardError):
    pass


@dataclass(frozen=True)
class DeploymentStatus:
    name: str
    status: str
    message: str = ""


@dataclass(frozen=True)
class AppStatus:
    name: str
    status: str
    message: str = ""
    deployments: dict[str, DeploymentStatus] = field(default_factory=dict)


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    status: str
    message: str = ""
    start_time_ms: int | None = None
    end_time_ms: int | None = None


_BODY_EXCERPT = 300


def new_http_client(timeout_seconds: float) -> httpx.Client:
    """Shared by all reconciles. ``trust_env=False``: proxy variables meant for the operator's
    own egress must not capture in-cluster (or loopback) Dashboard addresses."""
    return httpx.Client(
        timeout=httpx.Timeout(timeout_seconds, connect=min(2.0, timeout_seconds)),
        trust_env=False,
    )


class DashboardClient:
    def __init__(self, base_url: str, http: httpx.Client) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http

    def update_serve_applications(self, config: dict[str, Any]) -> None:
        """PUT the whole multi-application config; Ray makes this idempotent."""
        self._call("PUT", "/api/serve/applications/", config)

    def get_serve_applications(self) -> dict[str, AppStatus]:
        body = self._call("GET", "/api/serve/applications/")
        apps = body.get("applications") if isinstance(body, dict) else None
        if not isinstance(apps, dict):
            raise DashboardInvalidJSON("Serve status has no 'applications' object", self.base_url)
        return {name: _app_status(name, app) for name, app in apps.items()}

    def submit_job(
        self,
        *,
        job_id: str,
        entrypoint: str,
        runtime_env: dict[str, Any] | None = None,
        metadata: dict[str, str] | None = None,
    ) -> str:
        """POST /api/jobs/. The id goes both as ``submission_id`` (current Ray) and ``job_id``
        (its older, still accepted name), so the job gets exactly the id stored in status."""
        body: dict[str, Any] = {"entrypoint": entrypoint, "submission_id": job_id, "job_id": job_id}
        if runtime_env:
            body["runtime_env"] = runtime_env
        if metadata:
            body["metadata"] = metadata
        answer = self._call("POST", "/api/jobs/", body)
        if not isinstance(answer, dict):
            raise DashboardInvalidJSON("job submission answer is not an object", self.base_url)
        return str(answer.get("submission_id") or answer.get("job_id") or job_id)

    def get_job(self, job_id: str) -> JobInfo | None:
        """None when the Jobs API does not know the id (404): not submitted yet."""
        body = self._call("GET", f"/api/jobs/{job_id}", allow_404=True)
        if body is None:
            return None
        if not isinstance(body, dict) or "status" not in body:
            raise DashboardInvalidJSON("job info has no 'status'", self.base_url)
        return JobInfo(
            job_id=job_id,
            status=str(body["status"]),
            message=str(body.get("message") or ""),
            start_time_ms=_int_or_none(body.get("start_time")),
            end_time_ms=_int_or_none(body.get("end_time")),
        )

    def stop_job(self, job_id: str) -> bool:
        body = self._call("POST", f"/api/jobs/{job_id}/stop", allow_404=True)
        return bool(isinstance(body, dict) and body.get("stopped"))

    def _call(self, method: str, path: str, payload: Any = None, allow_404: bool = False) -> Any:
        url = self.base_url + path
        try:
            response = self._http.request(method, url, json=payload)
        except httpx.TimeoutException as exc:
            raise DashboardTimeout(f"{method} {url}: timed out ({exc})", url) from exc
        except httpx.TransportError as exc:
            raise DashboardUnreachable(f"{method} {url}: {exc}", url) from exc
        if allow_404 and response.status_code == 404:
            return None
        if response.status_code >= 400:
            excerpt = response.text[:_BODY_EXCERPT]
            cls = DashboardHTTPError
            if path == "/api/jobs/" and "already exists" in excerpt:
                cls = JobAlreadyExists
            raise cls(
                f"{method} {url}: HTTP {response.status_code}: {excerpt}",
                url,
                response.status_code,
                excerpt,
            )
        if not response.content:
            return {}
        try:
            return response.json()
        except ValueError as exc:
            raise DashboardInvalidJSON(
                f"{method} {url}: invalid JSON: {response.text[:_BODY_EXCERPT]!r}", url
            ) from exc


def _app_status(name: str, app: Any) -> AppStatus:
    app = app if isinstance(app, dict) else {}
    deployments = app.get("deployments") if isinstance(app.get("deployments"), dict) else {}
    return AppStatus(
        name=name,
        status=str(app.get("status") or ""),
        message=str(app.get("message") or ""),
        deployments={
            dname: DeploymentStatus(
                name=dname,
                status=str((d or {}).get("status") or ""),
                message=str((d or {}).get("message") or ""),
            )
            for dname, d in deployments.items()
        },
    )


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
