"""The fake Dashboard's Serve multi-application API: ``PUT``/``GET /api/serve/applications/``.

A submitted config replaces the applications (an unchanged one keeps its state, as in Ray).
Their statuses follow a ``ServePolicy`` over time unless the test fixes them.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .api import Answer, BadRequest, require_json

SERVE_PATH = "/api/serve/applications/"
APP_STATUSES = frozenset({"NOT_STARTED", "DEPLOYING", "RUNNING", "DEPLOY_FAILED", "UNHEALTHY"})
DEPLOYMENT_STATUSES = frozenset({"UPDATING", "HEALTHY", "UNHEALTHY"})


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


class ServeApi:
    def __init__(self, policy: ServePolicy) -> None:
        self.policy = policy
        """Read on every answer, so a test may swap it at any time."""
        self._lock = threading.RLock()
        self._apps: dict[str, _App] = {}
        self._config: dict[str, Any] | None = None

    # ---------------------------------------------------------------- state, for tests

    @property
    def config(self) -> dict[str, Any] | None:
        """The last accepted multi-application config (a copy)."""
        with self._lock:
            return json.loads(json.dumps(self._config)) if self._config else None

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

    def set_statuses(
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

    # -------------------------------------------------------------------------- HTTP

    def answer(self, method: str, route: str, body: Any) -> Answer | None:
        if route != SERVE_PATH:
            return None
        if method == "PUT":
            return self._put(require_json(body))
        if method == "GET":
            return self._get()
        return None

    def _put(self, body: Any) -> Answer:
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
            self._config = config
        return 200, {}

    def _get(self) -> Answer:
        return 200, {
            "controller_info": {"node_id": "fake", "actor_id": "fake"},
            "proxy_location": "EveryNode",
            "http_options": {"host": "0.0.0.0", "port": 8000},
            "deploy_mode": "MULTI_APP",
            "applications": self.applications(),
        }

    def _app(self, name: str) -> _App:
        if name not in self._apps:
            raise KeyError(f"no Serve application {name!r}; known: {sorted(self._apps)}")
        return self._apps[name]

    def _app_details(self, name: str, app: _App, now: float) -> dict[str, Any]:
        policy = self.policy
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


def _validate_serve_config(body: Any) -> dict[str, Any]:
    """The checks Ray's ServeDeploySchema makes that a client can get wrong."""
    if not isinstance(body, dict):
        raise BadRequest("1 validation error for ServeDeploySchema\n  value is not a valid dict")
    apps = body.get("applications")
    if not isinstance(apps, list):
        problem = "field required" if apps is None else "value is not a valid list"
        raise BadRequest(f"1 validation error for ServeDeploySchema\napplications\n  {problem}")
    names: set[str] = set()
    prefixes: set[str] = set()
    for index, app in enumerate(apps):
        where = f"applications -> {index}"
        if not isinstance(app, dict):
            raise BadRequest(f"1 validation error for ServeDeploySchema\n{where}\n  not a dict")
        if not isinstance(app.get("import_path"), str) or not app["import_path"]:
            raise BadRequest(
                f"1 validation error for ServeDeploySchema\n{where} -> import_path\n"
                "  field required"
            )
        name = app.get("name", "default")
        prefix = app.get("route_prefix", "/")
        if name in names:
            raise BadRequest(f"Found multiple configs for application {name}.")
        if prefix is not None:
            if not isinstance(prefix, str) or not prefix.startswith("/"):
                raise BadRequest(f'route_prefix "{prefix}" must start with "/"')
            if prefix in prefixes:
                raise BadRequest(f'Found duplicate route prefix "{prefix}".')
            prefixes.add(prefix)
        names.add(name)
        for dep_index, dep in enumerate(app.get("deployments") or []):
            if not isinstance(dep, dict) or not isinstance(dep.get("name"), str):
                raise BadRequest(
                    f"1 validation error for ServeDeploySchema\n{where} -> deployments -> "
                    f"{dep_index} -> name\n  field required"
                )
    return body
