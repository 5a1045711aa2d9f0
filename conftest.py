"""Project glue for this repository's own tests (the plugin itself loads by entry point).

The Ray operator knows nothing of the framework and the framework nothing of
Ray: the fixtures here join them, for every suite that runs the operator
(tests/operator, tests/reliability).  They give fake Ray Dashboards (real HTTP
servers on loopback, one per RayCluster head) and start the operator as its own
user, by default bound only to the ClusterRole the operator ships (least
privilege), so a missing RBAC verb fails the suite; ``--ray-operator-admin``
runs it as a system:masters user instead.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from envtest import OperatorHandle, Version, eventually
from envtest.binaries import Resolver
from ray_operator import Operator, OperatorConfig
from ray_operator.testing import FakeDashboardFleet, ServePolicy

ROOT = Path(__file__).resolve().parent
OPERATOR_CRDS = ROOT / "operator" / "config" / "crd"
OPERATOR_RBAC = ROOT / "operator" / "config" / "rbac" / "role.yaml"
OPERATOR_SAMPLES = ROOT / "operator" / "config" / "samples"


#: OperatorConfig fields the operator's command line takes, for mode="process".
_PROCESS_FLAGS = {"namespace": "--namespace", "serve_gate": "--serve-gate",
                  "controllers": "--controllers", "workers": "--workers",
                  "stale_cluster_delete_delay_seconds": "--stale-cluster-delete-delay"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--ray-operator-admin", action="store_true", default=False,
                     help="run the Ray operator as an admin instead of under its ClusterRole")


@pytest.fixture(scope="session")
def default_binaries_version() -> Version:
    """The Kubernetes version this run tests (``make test`` has built it already)."""
    return Resolver(os.environ.get("ENVTEST_K8S_VERSION")).resolve_version()


@pytest.fixture
def serve_policy() -> ServePolicy:
    """How a fake Dashboard's Serve apps behave once a config is submitted (override per test)."""
    return ServePolicy()


@pytest.fixture
def dashboards(namespace: str, serve_policy: ServePolicy,
               tmp_path: Path) -> Iterator[FakeDashboardFleet]:
    """Fake Ray Dashboards, one per RayCluster, refusing connections until started.

    The fleet keeps a map file too, so an operator in another process reaches them.
    """
    fleet = FakeDashboardFleet(namespace=namespace, serve_policy=serve_policy,
                               map_file=tmp_path / "dashboards.json")
    yield fleet
    fleet.close()


class RayOperatorHandle:
    """A running Ray operator and what a test asks of it.

    A crash fault (``faults.crash_after_write``, exploration) replaces the running
    instance with a fresh one, whose in-memory records start anew: the records a test
    reads here are every instance's, and a controller is looked up on the instance
    running now, once it runs it."""

    def __init__(self, running: OperatorHandle, holder: dict[str, Any] | None) -> None:
        self.running = running
        self._holder = holder

    @property
    def operator(self) -> Operator | None:
        """The running instance (after a crash fault, the fresh one: its records start anew)."""
        return self._holder.get("operator") if self._holder is not None else None

    @property
    def instances(self) -> list[Operator]:
        """Every instance started, the first first (one more after each crash fault)."""
        return list(self._holder.get("instances", [])) if self._holder is not None else []

    @property
    def restarts(self) -> int:
        """How many times a crash fault replaced the instance (0 in a plain run)."""
        return int(self.running.restarts)

    def reconcilers(self, name: str) -> list[Any]:
        """The reconciler of controller ``name`` in every instance that ran it."""
        found = []
        for operator in self.instances:
            try:
                found.append(operator.controller(name).reconciler)
            except LookupError:
                continue
        return found

    def controller(self, name: str) -> Any:
        """Controller ``name`` of the instance running now (waiting for a fresh one to
        start it)."""
        return eventually(lambda: _controller_of(self.operator, name), timeout=30,
                          message=f"no running instance has controller {name!r}")

    def retries(self, name: str, key: str | None = None) -> list[Any]:
        """The retries controller ``name`` recorded in every instance, in order (``key``:
        of one object only)."""
        found = [retry for operator in self.instances
                 for retry in self.retries_of(operator, name)]
        return [r for r in found if key is None or r.key == key]

    def retries_of(self, instance: Operator, name: str) -> list[Any]:
        """The retries controller ``name`` of one instance recorded while it ran: not those
        an instance a crash fault stopped recorded on its way out (its requests refused, its
        connections cut: a killed process would record nothing)."""
        stopped = (self._holder or {}).get("stopped", {}).get(id(instance))
        return [r for r in _records(instance, name, "retries")
                if stopped is None or r.monotonic < stopped]

    @property
    def user(self) -> str:
        """The operator's user name, as the audit log shows it."""
        return self.running.user.name

    def logs(self) -> str:
        return self.running.logs()

    def stop(self) -> None:
        self.running.stop()


@pytest.fixture
def ray_operator(request: pytest.FixtureRequest, run_operator: Callable[..., OperatorHandle],
                 dashboards: FakeDashboardFleet,
                 namespace: str) -> Callable[..., RayOperatorHandle]:
    """``ray_operator(serve_gate="none", mode="thread"|"process", **config)``: start it."""
    least_privilege = not request.config.getoption("--ray-operator-admin")

    def start(*, mode: str = "thread", name: str = "ray-operator",
              cluster_roles: Any = OPERATOR_RBAC if least_privilege else None,
              cluster: Any = None, api_host: str | None = None,
              **config: Any) -> RayOperatorHandle:
        """``cluster``: a test's own control plane instead of the session's; ``api_host``:
        reach the apiserver at another address (a proxy the test controls)."""
        config.setdefault("namespace", namespace)
        if mode == "process":
            return _start_process(run_operator, dashboards, name, cluster_roles, config)
        operator_holder: dict[str, Any] = {}

        def target(api_client: Any, stop: threading.Event) -> None:
            if api_host:
                api_client.configuration.host = api_host
            operator = Operator(api_client, OperatorConfig(
                dashboard_resolver=dashboards.resolver, **config))
            operator_holder["operator"] = operator
            operator_holder.setdefault("instances", []).append(operator)
            stopped = operator_holder.setdefault("stopped", {})

            def note_stop() -> None:  # when a crash fault (or the test's end) stopped it
                stop.wait()
                stopped[id(operator)] = time.monotonic()

            threading.Thread(target=note_stop, daemon=True).start()
            operator.run(stop)

        running = run_operator(target, name=name, cluster_roles=cluster_roles,
                               loggers=("ray_operator",), cluster=cluster)
        operator = eventually(lambda: operator_holder.get("operator"), timeout=10)
        eventually(operator.started.is_set, timeout=60,
                   message="the Ray operator's caches never synced")
        return RayOperatorHandle(running, operator_holder)

    return start


def _controller_of(operator: Operator | None, name: str) -> Any:
    """The instance's controller ``name``, once it runs its controllers (else None)."""
    if operator is None or not operator.started.is_set():
        return None
    try:
        return operator.controller(name)
    except LookupError:
        return None


def _records(operator: Operator, name: str, field: str) -> list[Any]:
    """What controller ``name`` of one instance recorded (none if it never ran it)."""
    try:
        controller = operator.controller(name)
    except LookupError:
        return []
    return list(getattr(controller, field))


def _start_process(run_operator: Callable[..., OperatorHandle], dashboards: FakeDashboardFleet,
                   name: str, cluster_roles: Any, config: dict[str, Any]) -> RayOperatorHandle:
    """The operator as a separate process (``python -m ray_operator``), reaching the fake
    Dashboards through the map file the fleet keeps current; returns once its caches synced."""
    command = [sys.executable, "-m", "ray_operator", "--kubeconfig", "{kubeconfig}",
               "--dashboard-resolver", "ray_operator.testing:file_resolver"]
    unknown = set(config) - set(_PROCESS_FLAGS)
    if unknown:
        raise pytest.UsageError(f"mode='process' passes only {sorted(_PROCESS_FLAGS)} to the "
                                f"operator's command line, not {sorted(unknown)}")
    for field, value in config.items():
        if value is not None:
            text = ",".join(value) if isinstance(value, (list, tuple)) else str(value)
            command += [_PROCESS_FLAGS[field], text]
    running = run_operator(command, name=name, cluster_roles=cluster_roles,
                           env={"RAY_OPERATOR_DASHBOARD_MAP": str(dashboards.map_file)})
    eventually(lambda: "caches synced" in running.logs(), timeout=60,
               message="the Ray operator process never synced its caches")
    return RayOperatorHandle(running, None)
