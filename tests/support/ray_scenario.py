"""The seed's scenario, written once: a RayService comes up while its head Pod and Dashboard lag.

Used by ``tests/operator/test_status_writes.py`` (the measurement), ``bench.bench_status_writes``
(repeated runs) and ``bench.demo`` (the timeline), so all three measure the same thing.

What happens, with fixed delays (:class:`Timing`), in a fresh namespace where the operator is
already running:

1. the sample RayService is created;
2. the operator prepares a cluster and creates its Pods; a :class:`~envtest.PodSimulator` leaves
   each Ray Pod Pending for ``head_running_after`` s, then Running but not Ready for
   ``head_ready_after`` s, then Ready;
3. the cluster's fake Dashboard (a real HTTP server) refuses connections until
   ``dashboard_after`` s after the head Pod became Ready
   (``FakeDashboardFleet.start_when_head_ready``);
4. once the Serve config is submitted, its applications report DEPLOYING/UPDATING for
   ``serve_ready_after`` s, then RUNNING/HEALTHY (``Timing.serve_policy``, set on the fleet);
5. the run ends when ``serviceStatus`` is ``Running``.

The result counts the operator's writes to ``rayservices/status`` from the audit log, from before
the create to the moment ``Running`` was observed, and carries a timeline of everything seen on
the way (Pod phases, Dashboard requests, status writes, promotion), reported live to ``on_event``.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml
from kubernetes.client.rest import ApiException

from envtest import (
    ApiCall,
    ApiCalls,
    AuditLog,
    Change,
    ControlPlane,
    Mark,
    PodPlan,
    PodSimulator,
    Recorder,
    RestMapper,
    ThreadOperator,
    add_watchdog,
    apply,
    create_namespace,
    delete_namespace,
    eventually,
    grant_cluster_roles,
    namespace_name,
    remove_watchdog,
    request,
    resolve_kind,
)
from ray_operator import Operator, OperatorConfig, ServeGate
from ray_operator.testing import FakeDashboardFleet, ServePolicy
from ray_operator.testing.fake_dashboard import SERVE_PATH

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "operator" / "config" / "samples" / "ray_v1_rayservice.yaml"
CRDS = ROOT / "operator" / "config" / "crd"
RBAC = ROOT / "operator" / "config" / "rbac" / "role.yaml"
GATES: tuple[ServeGate, ...] = ("head-pod", "none")
RAY_GROUP_PATH = "/apis/ray.io/v1"
STATUS_WRITE_VERBS = ("update", "patch")
#: Status fields that change on every write and say nothing new (the seed's redundant writes).
STATUS_NOISE = ("*lastUpdateTime", "*LastUpdateTime", "*lastTransitionTime")

# Timeline event kinds, one lane each in the demo's chart.
POD = "pod"
DASHBOARD = "dashboard"
STATUS_WRITE = "status-write"
STATUS = "status"
OBJECT = "object"
KINDS = (POD, DASHBOARD, STATUS_WRITE, STATUS, OBJECT)
REORDER_SECONDS = 0.25


@dataclass(frozen=True)
class Timing:
    """The scenario's fixed delays (seconds)."""

    head_running_after: float = 4.0
    """Each Ray Pod stays Pending this long after it is created."""
    head_ready_after: float = 1.0
    """Then Running but not Ready this long."""
    dashboard_after: float = 6.0
    """The Dashboard starts answering this long after the head Pod became Ready."""
    serve_ready_after: float = 3.0
    """Serve applications are DEPLOYING/UPDATING this long after submission."""
    timeout: float = 60.0
    """Upper bound for the whole run."""

    def serve_policy(self) -> ServePolicy:
        return ServePolicy(ready_after_seconds=self.serve_ready_after)

    def pod_plan(self) -> PodPlan:
        return PodPlan(running_after=self.head_running_after, ready_after=self.head_ready_after)

    @property
    def dashboard_up_at(self) -> float:
        """Nominal seconds from the head Pod's creation until the Dashboard answers."""
        return self.head_running_after + self.head_ready_after + self.dashboard_after


@dataclass(frozen=True)
class Event:
    t: float
    """Seconds since the scenario started (the RayService was created right after)."""
    kind: str
    text: str
    detail: str = ""


@dataclass
class ScenarioResult:
    label: str
    namespace: str
    service: str
    status_writes: int = 0
    """Operator writes to rayservices/status from creation until Running was observed."""
    status_write_times: list[float] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    duration: float = 0.0
    """Seconds from the create until Running was observed."""
    head_created_at: float | None = None
    head_ready_at: float | None = None
    dashboard_up_at: float | None = None
    first_dashboard_request_at: float | None = None
    promoted_at: float | None = None
    running_at: float | None = None
    dashboard_requests: int = 0
    """Requests the fake Dashboard answered."""
    refused_calls: int = 0
    """Dashboard calls the operator made that were refused (from the operator's log)."""
    refused_call_times: list[float] = field(default_factory=list)
    redundant_status_writes: int = 0
    """Status writes kube-apiserver did not store (the object was the same after them)."""
    noise_only_status_writes: int = 0
    """Status writes that changed nothing but timestamps (``STATUS_NOISE``), no-ops included."""
    serve_submissions: int = 0
    active_cluster: str = ""
    started_at: dt.datetime | None = None
    """Wall-clock time of ``t = 0`` (the events' origin)."""
    writes: list[ApiCall] = field(default_factory=list)
    """Every write in the namespace from the create until Running (the audit log's calls)."""
    verdicts: dict[str, bool | None] = field(default_factory=dict)
    """``writes`` judged, with ``STATUS_NOISE`` as noise: audit id -> redundant?"""
    changes: list[Change] = field(default_factory=list)
    """The RayService's recorded versions, with their field-level diffs."""

    RAW = ("events", "started_at", "writes", "verdicts", "changes")

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in self.RAW}
        data["events"] = [e.__dict__ for e in self.events]
        data["started_at"] = self.started_at.isoformat() if self.started_at else None
        return data


def sample_rayservice(name: str | None = None) -> dict[str, Any]:
    """The RayService sample shipped with the operator (optionally renamed)."""
    manifest = yaml.safe_load(SAMPLE.read_text())
    if name:
        manifest["metadata"]["name"] = name
    return manifest


class _RefusedCalls(logging.Handler):
    """The operator's own log lines for one RayService that report a refused Dashboard call.

    A refused connection never reaches the fake Dashboard, so only the caller can tell; an
    in-process operator logs each failed call (``... Connection refused``) with its ``key``.
    """

    LOGGER = "ray_operator.controllers.rayservice"

    def __init__(self, key: str) -> None:
        super().__init__(logging.INFO)
        self.key = key
        self.records: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "key", None) != self.key:
            return
        message = record.getMessage()
        # One line per failed call ("<state>: failed to ...: Connection refused"); the line
        # about the status write that records it repeats the text, and is not a call.
        if "Connection refused" in message and not message.startswith("status written"):
            self.records.append((record.created, message))

    def __enter__(self) -> _RefusedCalls:
        logging.getLogger(self.LOGGER).addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger(self.LOGGER).removeHandler(self)


class _Watcher:
    """Collects new timeline events from every source on each ``poll``."""

    def __init__(self, result: ScenarioResult, api_client: kubernetes.client.ApiClient,
                 audit: AuditLog, operator_user: str, fleet: FakeDashboardFleet,
                 simulator: PodSimulator, refused: _RefusedCalls, since: Mark, t0: float,
                 wall0: dt.datetime, on_event: Callable[[Event], None] | None) -> None:
        self.result = result
        self.api_client = api_client
        self.audit = audit
        self.operator_user = operator_user
        self.fleet = fleet
        self.simulator = simulator
        self.refused = refused
        self._seen_refused = 0
        self.since = since
        self.t0 = t0
        self.wall0 = wall0
        self.on_event = on_event
        self._seen_calls: set[str] = set()
        self._seen_transitions = 0
        self._seen_requests: dict[str, int] = {}
        self._seen_up: set[str] = set()
        self._heads: set[str] = set()
        self._last: dict[str, Any] = {}
        self._buffer: list[Event] = []
        self.status: dict[str, Any] = {}

    def rel(self, monotonic: float) -> float:
        return round(monotonic - self.t0, 3)

    def rel_wall(self, when: dt.datetime | None) -> float:
        return round(((when or dt.datetime.now(dt.UTC)) - self.wall0).total_seconds(), 3)

    def emit(self, events: list[Event], *, settle: float = REORDER_SECONDS) -> None:
        """Pass events on in time order. Sources are read one after another (the audit log may
        show a write a poll after the status it wrote), so events wait ``settle`` seconds in a
        buffer first; ``settle=0`` flushes it."""
        self._buffer.extend(events)
        horizon = time.monotonic() - self.t0 - settle
        ready = sorted((e for e in self._buffer if e.t <= horizon), key=lambda e: e.t)
        self._buffer = [e for e in self._buffer if e.t > horizon]
        for event in ready:
            self.result.events.append(event)
            if self.on_event is not None:
                self.on_event(event)

    def poll(self, flush: bool = False) -> dict[str, Any]:
        """Gather what happened since the last poll; returns the RayService's status."""
        found: list[Event] = []
        found += self._status_events()
        found += self._audit_events()
        found += self._pod_events()
        found += self._dashboard_events()
        found += self._refused_events()
        self.emit(found, settle=0.0 if flush else REORDER_SECONDS)
        return self.status

    def _audit_events(self) -> list[Event]:
        ns = self.result.namespace
        events = []
        for call in self.audit.calls(user=self.operator_user, namespace=ns, since=self.since,
                                     writes_only=True, sync=False):
            if call.audit_id in self._seen_calls:
                continue
            self._seen_calls.add(call.audit_id)
            t = self.rel_wall(call.completed)
            if (call.resource == "rayservices" and call.subresource == "status"
                    and call.verb in STATUS_WRITE_VERBS and call.name == self.result.service):
                self.result.status_write_times.append(t)
                n = len(self.result.status_write_times)
                outcome = "409 Conflict" if call.code == 409 else str(call.code)
                events.append(Event(t, STATUS_WRITE, f"status write #{n}",
                                    f"{call.verb} rayservices/status: {outcome}"))
            elif call.verb == "create" and call.resource in ("rayclusters", "pods", "services"):
                what = {"rayclusters": "RayCluster", "pods": "Pod",
                        "services": "Service"}[call.resource]
                events.append(Event(t, OBJECT, f"{what} created", call.name))
        return events

    def _pod_events(self) -> list[Event]:
        events = []
        if not self._heads:  # until the operator has created it: look for the head Pod
            listing = request(self.api_client, "GET",
                              f"/api/v1/namespaces/{self.result.namespace}/pods",
                              query={"labelSelector": "ray.io/node-type=head"})
            for pod in listing.get("items") or []:
                name = pod["metadata"]["name"]
                self._heads.add(name)
                t = self.rel(time.monotonic())
                if self.result.head_created_at is None:
                    self.result.head_created_at = t
                events.append(Event(t, POD, "head Pod Pending", name))
        transitions = self.simulator.transitions[self._seen_transitions:]
        self._seen_transitions += len(transitions)
        for transition in transitions:
            if transition.pod not in self._heads:
                continue  # workers follow the same plan; the head is what the gate looks at
            t = self.rel(transition.at)
            if transition.state == "Ready" and self.result.head_ready_at is None:
                self.result.head_ready_at = t
            events.append(Event(t, POD, f"head Pod {transition.state}", transition.pod))
        return events

    def _dashboard_events(self) -> list[Event]:
        events = []
        for cluster in self.fleet.clusters():
            namespace, _, name = cluster.partition("/")
            if namespace != self.result.namespace:
                continue
            fake = self.fleet.dashboard(namespace, name)
            for at, what in fake.transitions:
                if what == "started" and cluster not in self._seen_up:
                    self._seen_up.add(cluster)
                    t = self.rel(at)
                    if self.result.dashboard_up_at is None:
                        self.result.dashboard_up_at = t
                    events.append(Event(t, DASHBOARD, "Dashboard answering", name))
            journal = fake.journal
            for entry in journal[self._seen_requests.get(cluster, 0):]:
                t = self.rel(entry.monotonic)
                self.result.dashboard_requests += 1
                if self.result.first_dashboard_request_at is None:
                    self.result.first_dashboard_request_at = t
                if entry.method == "PUT":
                    self.result.serve_submissions += 1
                label = "Serve config submitted" if entry.method == "PUT" else "Serve status read"
                events.append(Event(t, DASHBOARD, label,
                                    f"{entry.method} {entry.path}: {entry.status}"))
            self._seen_requests[cluster] = len(journal)
        return events

    def _refused_events(self) -> list[Event]:
        records = self.refused.records[self._seen_refused:]
        self._seen_refused += len(records)
        events = []
        for created, message in records:
            t = round(created - self.wall0.timestamp(), 3)
            self.result.refused_calls += 1
            self.result.refused_call_times.append(t)
            method = "PUT" if "submit" in message else "GET"
            events.append(Event(t, DASHBOARD, "Dashboard call refused",
                                f"{method} {SERVE_PATH}: connection refused"))
        return events

    def _status_events(self) -> list[Event]:
        path = (f"{RAY_GROUP_PATH}/namespaces/{self.result.namespace}/rayservices/"
                f"{self.result.service}")
        try:
            svc = request(self.api_client, "GET", path)
        except ApiException as exc:
            if exc.status == 404:
                return []
            raise
        t = self.rel(time.monotonic())
        status = svc.get("status") or {}
        self.status = status
        now = {
            "serviceStatus": status.get("serviceStatus") or "",
            "active": (status.get("activeServiceStatus") or {}).get("rayClusterName") or "",
            "pending": (status.get("pendingServiceStatus") or {}).get("rayClusterName") or "",
        }
        events = []
        before = self._last
        if now["pending"] and now["pending"] != before.get("pending"):
            events.append(Event(t, STATUS, "pending cluster named", now["pending"]))
        if now["active"] and now["active"] != before.get("active"):
            if now["active"] == before.get("pending"):
                self.result.promoted_at = t
                events.append(Event(t, STATUS, "promoted pending -> active", now["active"]))
            else:
                events.append(Event(t, STATUS, "active cluster", now["active"]))
        if now["serviceStatus"] and now["serviceStatus"] != before.get("serviceStatus"):
            events.append(Event(t, STATUS, f"serviceStatus {now['serviceStatus']}"))
            if now["serviceStatus"] == "Running" and self.result.running_at is None:
                self.result.running_at = t
        self._last = now
        self.result.active_cluster = now["active"]
        return events


def run_scenario(
    api_client: kubernetes.client.ApiClient,
    namespace: str,
    *,
    audit: AuditLog,
    operator_user: str,
    fleet: FakeDashboardFleet,
    label: str,
    timing: Timing | None = None,
    service: dict[str, Any] | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_tick: Callable[[ScenarioResult, dict[str, Any]], None] | None = None,
    poll_interval: float = 0.05,
) -> ScenarioResult:
    """Run the scenario against an operator already running on ``namespace``; see the module.

    ``api_client`` is an admin's (it creates the RayService and moves Pods); ``audit`` is the
    control plane's audit log and ``operator_user`` the operator's user name in it; ``fleet``
    resolves the operator's Dashboards and should have ``timing.serve_policy()``.
    ``label`` names the run (e.g. the gate setting) in the result.
    """
    timing = timing or Timing()
    manifest = copy.deepcopy(service or sample_rayservice())
    name = manifest["metadata"]["name"]
    result = ScenarioResult(label=label, namespace=namespace, service=name)
    with ExitStack() as stack:
        simulator = PodSimulator(api_client, selector="ray.io/is-ray-node=yes",
                                 namespace=namespace, plan=timing.pod_plan()).start()
        stack.callback(simulator.stop)
        watcher = fleet.start_when_head_ready(api_client, namespace,
                                              delay_seconds=timing.dashboard_after)
        stack.callback(watcher.stop)
        refused = stack.enter_context(_RefusedCalls(f"{namespace}/{name}"))
        recording = stack.enter_context(Recorder(
            api_client, [resolve_kind(RestMapper(api_client), "rayservices")], namespace))
        if not watcher.wait_synced(10):
            raise RuntimeError(f"the head-Pod watcher for {namespace} never synced")
        since = audit.mark()
        t0, wall0 = time.monotonic(), dt.datetime.now(dt.UTC)
        result.started_at = wall0
        collector = _Watcher(result, api_client, audit, operator_user, fleet, simulator,
                             refused, since, t0, wall0, on_event)
        apply(api_client, manifest, namespace)
        collector.emit([Event(collector.rel(time.monotonic()), OBJECT, "RayService created",
                              name)])

        def running() -> bool:
            status = collector.poll()
            if on_tick is not None:
                on_tick(result, status)
            return status.get("serviceStatus") == "Running"

        eventually(running, timeout=timing.timeout, interval=poll_interval,
                   message=f"[{label}] RayService {namespace}/{name} never became Running")
        until = audit.mark()
        result.duration = round(time.monotonic() - t0, 3)
        collector.poll(flush=True)
        result.status_writes = len(audit.calls(
            user=operator_user, verb=STATUS_WRITE_VERBS, resource="rayservices",
            subresource="status", namespace=namespace, name=name, since=since, until=until))
        calls = ApiCalls(audit, since, recorders=[recording])
        writes = {"user": operator_user, "resource": "rayservices", "subresource": "status",
                  "namespace": namespace, "name": name, "until": until}
        result.redundant_status_writes = len(calls.redundant(**writes))
        result.noise_only_status_writes = len(calls.redundant(noise=STATUS_NOISE, **writes))
        result.writes = calls.calls(namespace=namespace, writes_only=True, until=until)
        result.verdicts = calls.verdicts_for(result.writes, STATUS_NOISE)
        result.changes = list(recording.changes)
        return result


# -- outside pytest: the operator in a fresh namespace (the bench and the demo) ------------------


@dataclass
class Stage:
    """A fresh namespace with its fake Dashboards and a running operator, ready for a scenario."""

    namespace: str
    fleet: FakeDashboardFleet
    operator: ThreadOperator
    gate: str

    @property
    def user(self) -> str:
        return self.operator.user.name

    def run(self, control_plane: ControlPlane, timing: Timing, **kwargs: Any) -> ScenarioResult:
        return run_scenario(control_plane.api_client(), self.namespace,
                            audit=control_plane.audit_log, operator_user=self.user,
                            fleet=self.fleet, label=f"serve_gate={self.gate}", timing=timing,
                            **kwargs)


@contextmanager
def operator_stage(control_plane: ControlPlane, gate: ServeGate,
                   timing: Timing) -> Iterator[Stage]:
    """What the ``ray_operator`` fixture does, for scripts: the operator runs in a thread as its
    own client-certificate user bound to the ClusterRole it ships, watching one new namespace.
    Everything is stopped and the namespace deleted on exit."""
    admin = control_plane.api_client()
    namespace = namespace_name(f"demo-gate-{gate}")
    create_namespace(admin, namespace)
    fleet = FakeDashboardFleet(namespace=namespace, serve_policy=timing.serve_policy())
    user_name = f"ray-operator:serve-gate-{gate}"
    grant_cluster_roles(admin, user_name, RBAC)
    user = control_plane.add_user(user_name)
    holder: dict[str, Operator] = {}

    def target(api_client: kubernetes.client.ApiClient, stop: threading.Event) -> None:
        operator = Operator(api_client, OperatorConfig(
            namespace=namespace, serve_gate=gate,
            dashboard_resolver=fleet.resolver))
        holder["operator"] = operator
        operator.run(stop)

    running = ThreadOperator(user_name, user, target, 10.0, ("ray_operator",))
    add_watchdog(running.check)
    try:
        eventually(lambda: "operator" in holder and holder["operator"].started.is_set(),
                   timeout=60, message="the Ray operator's caches never synced")
        yield Stage(namespace, fleet, running, gate)
    finally:
        remove_watchdog(running.check)
        try:
            running.stop()
        finally:
            fleet.close()
            delete_namespace(admin, namespace)
