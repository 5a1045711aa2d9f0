"""Issue 6, tests 1, 3 and 4: the RayService controller gated on a Running+Ready head Pod.

Real control plane, the operator as its own user under its ClusterRole, fake Ray Dashboards that
are real HTTP servers on loopback (refusing connections until started). Envtest has no kubelet,
so Pods stay Pending until a test moves them (``pods.set_running``), as in the seed's test.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from envtest import consistently, eventually
from ray_operator.controllers.statusdiff import without_timestamps
from ray_operator.testing import FakeRayDashboard
from ray_operator.testing.fake_dashboard import SERVE_PATH
from tests.support.ray_scenario import sample_rayservice

NAME = "rayservice-sample"
GROUP, VERSION = "ray.io", "v1"
APP, DEPLOYMENT = "fruit_app", "MangoStand"
#: The operator's requeue period in these tests (KubeRay's is 2 s; test_status_writes keeps it):
#: a reconcile every half second, so each "nothing happens" window below sees four or more.
REQUEUE_SECONDS = 0.5
GATE_HOLD_SECONDS = 2.5  # how long "nothing happens" is checked while the gate is closed
HOLD_SECONDS = 2.0  # how long a promotion or a switch is checked not to happen
PROMOTION_TIMEOUT = 15.0  # KubeRay's test waits 15 s for the promotion


class RayServiceDriver:
    """One RayService in the test namespace and the moves a test makes around it."""

    def __init__(self, k8s: Any, namespace: str, apply: Callable[..., Any], pods: Any,
                 wait_for: Callable[..., dict[str, Any]], dashboards: Any, api_calls: Any,
                 operator: Any, manifest: dict[str, Any] | None = None) -> None:
        self.k8s = k8s
        self.namespace = namespace
        self.apply = apply
        self.pods = pods
        self.wait_for = wait_for
        self.dashboards = dashboards
        self.api_calls = api_calls
        self.operator = operator
        self.operator_user = operator.user
        self.manifest = copy.deepcopy(manifest or sample_rayservice(NAME))

    # -- reading -----------------------------------------------------------------

    def get(self) -> dict[str, Any]:
        return self.k8s.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "rayservices", NAME)

    def status(self) -> dict[str, Any]:
        return self.get().get("status") or {}

    def active(self) -> str:
        return active_of(self.get())

    def pending(self) -> str:
        return pending_of(self.get())

    def cluster(self, name: str) -> dict[str, Any]:
        return self.k8s.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "rayclusters", name)

    def clusters(self) -> list[str]:
        listing = self.k8s.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "rayclusters", label_selector=f"ray.io/service={NAME}")
        return sorted(c["metadata"]["name"] for c in listing["items"])

    def head_pods(self, cluster: str) -> list[str]:
        listing = self.k8s.core.list_namespaced_pod(
            self.namespace, label_selector=f"ray.io/cluster={cluster},ray.io/node-type=head")
        return [p.metadata.name for p in listing.items if not p.metadata.deletion_timestamp]

    def head_pod(self, cluster: str) -> str:
        """The cluster's one head Pod, once the operator has created it."""
        heads = eventually(lambda: self.head_pods(cluster), timeout=15,
                           message=f"no head Pod for {cluster}")
        assert len(heads) == 1, heads
        return heads[0]

    def pod_phase(self, name: str) -> str:
        return self.k8s.core.read_namespaced_pod_status(name, self.namespace).status.phase

    def status_writes(self) -> int:
        """The operator's writes to this RayService's status since the test began (as without
        faults: under exploration, an injected refusal and the repeat of a write a crash cut
        off are left out)."""
        return self.api_calls.count(user=self.operator_user, verb=("update", "patch"),
                                    resource="rayservices", subresource="status", name=NAME,
                                    faulted=False)

    def submissions_allowed(self) -> int:
        """Serve submissions to one cluster: one, and one more for each fresh instance a
        crash fault started (KubeRay remembers what it submitted in memory:
        test_known_a_fresh_instance_submits_the_serve_config_once_more); 1 in a plain run."""
        return 1 + self.operator.restarts

    def selector(self, service: str) -> dict[str, str]:
        return self.k8s.core.read_namespaced_service(service, self.namespace).spec.selector

    def events(self, reason: str) -> list[Any]:
        listing = self.k8s.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={NAME},reason={reason}")
        return listing.items

    def gate_skips(self) -> int:
        """Reconciles of this RayService the operator ended at the head-Pod gate (its record)."""
        return sum(1 for reconciler in self.operator.reconcilers("rayservice")
                   for skip in reconciler.gate_skips
                   if skip.key == f"{self.namespace}/{NAME}" and skip.reason == "not-ready")

    def dashboard(self, cluster: str) -> FakeRayDashboard:
        return self.dashboards[cluster]

    # -- acting --------------------------------------------------------------------

    def create(self) -> str:
        """Create the RayService; returns the pending cluster's name."""
        self.apply(self.manifest)
        return self.wait_pending()

    def edit(self, mutate: Callable[[dict[str, Any]], None]) -> None:
        mutate(self.manifest)
        self.apply(self.manifest)

    def wait_pending(self, other_than: str = "", timeout: float = 10.0) -> str:
        svc = self.wait_for("RayService", NAME,
                            lambda o: pending_of(o) not in ("", other_than), timeout=timeout)
        return pending_of(svc)

    def wait_active(self, cluster: str, timeout: float = PROMOTION_TIMEOUT) -> dict[str, Any]:
        return self.wait_for("RayService", NAME,
                             lambda o: active_of(o) == cluster and not pending_of(o),
                             timeout=timeout)

    def bring_up(self) -> str:
        """Create it, make the head Pod Ready, start the Dashboard, wait for the promotion and
        until the RayService's copy of the cluster's status has caught up with it."""
        cluster = self.create()
        self.pods.set_running(self.head_pod(cluster))
        self.dashboard(cluster).start()
        svc = self.wait_active(cluster)
        assert (svc.get("status") or {}).get("serviceStatus") == "Running"

        def caught_up() -> bool:
            # The RayCluster's status shows the running head Pod (its IP), and the RayService's
            # copy of that status is the same: no write is still due to the head Pod's start.
            actual = self.cluster(cluster).get("status") or {}
            copied = (self.status().get("activeServiceStatus") or {}).get("rayClusterStatus")
            return bool((actual.get("head") or {}).get("podIP")) and (
                without_timestamps(copied) == without_timestamps(actual))

        eventually(caught_up, timeout=10, message="the RayService's rayClusterStatus lags")
        return cluster


def active_of(svc: dict[str, Any]) -> str:
    return ((svc.get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName") or ""


def pending_of(svc: dict[str, Any]) -> str:
    return ((svc.get("status") or {}).get("pendingServiceStatus") or {}).get(
        "rayClusterName") or ""


def condition(svc: dict[str, Any], kind: str) -> dict[str, Any]:
    for entry in (svc.get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return entry
    return {}


def serve_config(manifest: dict[str, Any]) -> dict[str, Any]:
    return yaml.safe_load(manifest["spec"]["serveConfigV2"])


@pytest.fixture
def rayservice(k8s, namespace, apply, pods, wait_for, dashboards, api_calls,
               ray_operator) -> Callable[..., RayServiceDriver]:
    """``rayservice(manifest=None, **operator_config)``: start the operator (as its own user,
    under its ClusterRole) and return a driver for the sample RayService (or ``manifest``)."""

    def make(manifest: dict[str, Any] | None = None, **config: Any) -> RayServiceDriver:
        config.setdefault("service_requeue_seconds", REQUEUE_SECONDS)
        operator = ray_operator(**config)
        return RayServiceDriver(k8s, namespace, apply, pods, wait_for, dashboards, api_calls,
                                operator, manifest)

    return make


def assert_serves(rs: RayServiceDriver, cluster: str) -> None:
    """Conditions and Services as they are once ``cluster`` is the only, active cluster."""
    svc = rs.wait_for("RayService", NAME,
                      lambda o: condition(o, "Ready").get("status") == "True", timeout=10)
    assert condition(svc, "Ready")["reason"] == "NonZeroServeEndpoints"
    upgrade = condition(svc, "UpgradeInProgress")
    assert (upgrade["status"], upgrade["reason"]) == ("False", "NoPendingCluster"), upgrade
    assert rs.selector(f"{NAME}-head-svc") == {"ray.io/cluster": cluster,
                                               "ray.io/node-type": "head"}
    assert rs.selector(f"{NAME}-serve-svc") == {"ray.io/cluster": cluster, "ray.io/serve": "true"}


# -- 1. the gate ---------------------------------------------------------------------------


@pytest.mark.parametrize("dashboard_state", ["serving", "refusing"])
def test_no_dashboard_call_until_the_head_pod_is_running_and_ready(dashboard_state, rayservice):
    rs = rayservice()
    cluster = rs.create()
    head = rs.head_pod(cluster)
    dashboard = rs.dashboard(cluster)
    if dashboard_state == "serving":
        dashboard.start()
    assert rs.status_writes() == 1  # the one that persisted the pending cluster's name
    skips = rs.gate_skips()

    def gate_closed() -> bool:
        status = rs.status()
        pending = status.get("pendingServiceStatus") or {}
        return (dashboard.journal == [] and rs.pod_phase(head) == "Pending"
                and status.get("serviceStatus") == "Restarting"
                and "dashboardStatus" not in pending  # a refused call would have set it
                and rs.status_writes() == 1)

    consistently(gate_closed, duration=GATE_HOLD_SECONDS, interval=0.25,
                 message=f"the Dashboard ({dashboard_state}) was called, or status written, "
                         "while the head Pod was Pending")
    assert rs.active() == "" and rs.pending() == cluster
    assert rs.gate_skips() - skips >= 2, "the operator did not reconcile while the gate held"

    if dashboard_state == "refusing":
        # The Dashboard comes up a second after the head Pod is Ready, like a real head's.
        rs.dashboards.start_when_head_ready(rs.k8s.api_client, rs.namespace, delay_seconds=1.0)
    ready_at = time.monotonic()
    rs.pods.set_running(head)
    rs.wait_active(cluster)
    assert time.monotonic() - ready_at < PROMOTION_TIMEOUT

    puts = dashboard.requests("PUT", SERVE_PATH)
    assert 1 <= len(puts) <= rs.submissions_allowed(), [
        f"{e.method} {e.path}" for e in dashboard.journal]
    assert all(put.monotonic >= ready_at for put in puts)
    assert puts[0].body == serve_config(rs.manifest)
    # Submitted once: two more reconciles (each reads Serve status) send no second PUT.
    submitted = len(puts)
    reads = len(dashboard.requests("GET", SERVE_PATH))
    dashboard.wait_for_request("GET", SERVE_PATH, count=reads + 2, timeout=10)
    assert len(dashboard.requests("PUT", SERVE_PATH)) <= max(submitted,
                                                              rs.submissions_allowed())
    assert_serves(rs, cluster)


def test_without_the_gate_the_dashboard_is_called_while_the_head_pod_is_pending(rayservice):
    """The control for the test above: with ``serve_gate="none"`` (before the seed's change) the
    same wait sees a Serve submission while the head Pod is still Pending."""
    rs = rayservice(serve_gate="none")
    cluster = rs.create()
    head = rs.head_pod(cluster)
    dashboard = rs.dashboard(cluster).start()
    dashboard.wait_for_request("PUT", SERVE_PATH, timeout=GATE_HOLD_SECONDS)
    assert rs.pod_phase(head) == "Pending"


# -- 3. KubeRay's own envtest steps ---------------------------------------------------------


def test_new_ray_version_is_promoted_only_after_its_head_pod_is_ready(rayservice):
    rs = rayservice()
    old = rs.bring_up()
    old_dashboard = rs.dashboard(old)
    submissions_to_old = len(old_dashboard.requests("PUT", SERVE_PATH))

    rs.edit(lambda m: m["spec"]["rayClusterConfig"].update(rayVersion="2.100.0"))
    new = rs.wait_pending(other_than=old)
    assert new != old and rs.active() == old
    svc = rs.wait_for("RayService", NAME,
                      lambda o: condition(o, "UpgradeInProgress").get("status") == "True")
    assert condition(svc, "UpgradeInProgress")["reason"] == "BothActivePendingClustersExist"
    new_head = rs.head_pod(new)
    assert rs.cluster(new)["spec"]["rayVersion"] == "2.100.0"
    # Its Dashboard answers already: only the head Pod's state holds the promotion back.
    new_dashboard = rs.dashboard(new).start()

    consistently(lambda: rs.active() == old and rs.pending() == new
                 and new_dashboard.journal == [], duration=HOLD_SECONDS, interval=0.25,
                 message="the new cluster was served or promoted before its head Pod was Ready")
    assert rs.selector(f"{NAME}-serve-svc")["ray.io/cluster"] == old

    rs.pods.set_running(new_head)
    rs.wait_active(new)
    assert 1 <= len(new_dashboard.requests("PUT", SERVE_PATH)) <= rs.submissions_allowed()
    # A fresh instance (a crash fault) may submit to the old cluster again before it is
    # replaced; a plain run never does.
    assert submissions_to_old <= len(old_dashboard.requests("PUT", SERVE_PATH)) <= \
        submissions_to_old + rs.operator.restarts
    assert_serves(rs, new)


def test_autoscaler_edits_never_switch_clusters(rayservice):
    rs = rayservice()
    active = rs.bring_up()
    workers = rs.k8s.core.list_namespaced_pod(
        rs.namespace, label_selector=f"ray.io/cluster={active},ray.io/node-type=worker").items
    victim = workers[0].metadata.name

    def scale(manifest: dict[str, Any]) -> None:
        group = manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
        group["replicas"] = 5
        group["scaleStrategy"] = {"workersToDelete": [victim]}

    rs.edit(scale)
    # The edit reaches the active cluster (copied, not a new cluster) ...
    cluster = rs.wait_for("RayCluster", active, lambda c: c["spec"]["workerGroupSpecs"][0].get(
        "replicas") == 5)
    assert cluster["spec"]["workerGroupSpecs"][0]["scaleStrategy"]["workersToDelete"] == [victim]

    # ... and the autoscaler's own edit of the cluster is left alone too.
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    rs.k8s.custom.replace_namespaced_custom_object(GROUP, VERSION, rs.namespace, "rayclusters",
                                                   active, cluster)

    def unchanged() -> bool:
        return (rs.active() == active and rs.pending() == ""
                and rs.clusters() == [active]
                and rs.cluster(active)["spec"]["workerGroupSpecs"][0]["replicas"] == 2)

    consistently(unchanged, duration=GATE_HOLD_SECONDS, interval=0.25,
                 message="an autoscaler edit switched or re-created clusters")
    assert rs.status()["serviceStatus"] == "Running"
    assert rs.selector(f"{NAME}-serve-svc")["ray.io/cluster"] == active


@pytest.mark.parametrize("level", ["deployment", "application"])
def test_unhealthy_longer_than_the_threshold_prepares_a_new_cluster(level, rayservice):
    threshold = 3
    manifest = sample_rayservice(NAME)
    manifest["spec"]["deploymentUnhealthySecondThreshold"] = threshold
    manifest["spec"]["serviceUnhealthySecondThreshold"] = threshold
    # The new cluster is created a requeue after the restart is marked (10 s in KubeRay): 1 s
    # here, so the test can wait for it, and ends where the operator rests (exploration
    # compares that end with a faulted run's, where a fresh instance creates it at once).
    rs = rayservice(manifest, service_restart_requeue_seconds=1.0)
    active = rs.bring_up()
    dashboard = rs.dashboard(active)

    unhealthy_at = time.monotonic()
    if level == "deployment":
        dashboard.set_deployment_status(APP, DEPLOYMENT, "UNHEALTHY", "replica crashed")

        def recorded(o: dict[str, Any]) -> bool:
            apps = (o.get("status") or {}).get("activeServiceStatus", {}).get(
                "applicationStatuses") or {}
            deps = (apps.get(APP) or {}).get("serveDeploymentStatuses") or {}
            return (deps.get(DEPLOYMENT) or {}).get("status") == "UNHEALTHY"
    else:
        dashboard.set_app_status(APP, "UNHEALTHY", "app crashed")

        def recorded(o: dict[str, Any]) -> bool:
            apps = (o.get("status") or {}).get("activeServiceStatus", {}).get(
                "applicationStatuses") or {}
            return (apps.get(APP) or {}).get("status") == "UNHEALTHY"

    svc = rs.wait_for("RayService", NAME, recorded, timeout=10)
    assert pending_of(svc) == "" and active_of(svc) == active  # unhealthy, not yet for long

    new = rs.wait_pending(other_than=active, timeout=threshold + 10)
    waited = time.monotonic() - unhealthy_at
    # Status times have whole seconds, so the operator may see up to 1 s more than there was.
    assert waited > threshold - 1, f"new cluster prepared after {waited:.1f} s"
    svc = rs.get()
    assert svc["status"]["serviceStatus"] == "Restarting"
    assert active_of(svc) == active and new != active
    assert condition(svc, "UpgradeInProgress")["status"] == "True"
    assert rs.events("Restarting"), "no Restarting event"
    eventually(lambda: new in rs.clusters(), timeout=10, message=f"RayCluster {new} not made")


def test_killed_right_after_marking_the_restart_the_restarting_event_is_not_lost(
        rayservice, faults):
    """Found by ``--envtest-explore=crashes``: the port wrote the Restarting status, then the
    event; killed between the two, the fresh instance found the status written and never
    said it. Now the event comes first (as KubeRay records it before its status update)."""
    threshold = 2
    manifest = sample_rayservice(NAME)
    manifest["spec"]["serviceUnhealthySecondThreshold"] = threshold
    rs = rayservice(manifest, service_restart_requeue_seconds=1.0)  # the new cluster 1 s later
    active = rs.bring_up()
    # The status writes from here: the unhealthy app recorded, then the restart marked.
    crash = faults.crash_after_write(2, resource="rayservices", subresource="status")
    rs.dashboard(active).set_app_status(APP, "UNHEALTHY", "app crashed")
    new = rs.wait_pending(other_than=active, timeout=threshold + 10)
    # The pending name is stored by the very write the crash follows: wait for the restart.
    # (Under exploration a point's own fault may restart it too: at least this one.)
    eventually(lambda: crash.injected == 1 and rs.operator.restarts >= 1, timeout=10)
    assert rs.status()["serviceStatus"] == "Restarting" and new != active
    eventually(lambda: rs.events("Restarting"), timeout=10,
               message="the Restarting event was lost with the killed instance")
    eventually(lambda: new in rs.clusters(), timeout=10, message=f"RayCluster {new} not made")


def test_known_a_fresh_instance_submits_the_serve_config_once_more(rayservice, faults):
    """Known, kept as KubeRay has it (found by ``--envtest-explore=crashes``): which Serve
    config was submitted to which cluster is remembered in memory (KubeRay's ServeConfigs
    cache), so an operator killed after the submission, started again, submits it once more.
    The PUT is idempotent for Ray Serve; the tests that count exactly one PUT hold for an
    operator that is not killed."""
    rs = rayservice()
    cluster = rs.create()
    head = rs.head_pod(cluster)
    dashboard = rs.dashboard(cluster)
    dashboard.start()
    # The first status write after the head Pod is Ready is the promotion, after the PUT.
    crash = faults.crash_after_write(1, resource="rayservices", subresource="status")
    rs.pods.set_running(head)
    rs.wait_active(cluster)
    eventually(lambda: crash.injected == 1 and rs.operator.restarts >= 1, timeout=10)
    dashboard.wait_for_request("PUT", SERVE_PATH, count=2, timeout=10)
    puts = dashboard.requests("PUT", SERVE_PATH)
    assert 2 <= len(puts) <= rs.submissions_allowed(), puts  # 2 in a plain run
    assert all(put.body == serve_config(rs.manifest) for put in puts)
    assert_serves(rs, cluster)


def test_timestamp_only_serve_changes_cause_no_status_write(rayservice):
    rs = rayservice()
    active = rs.bring_up()
    dashboard = rs.dashboard(active)
    writes = rs.status_writes()

    # Three more reconciles: each reads Serve status and refreshes only timestamps.
    reads = len(dashboard.requests("GET", SERVE_PATH))
    dashboard.wait_for_request("GET", SERVE_PATH, count=reads + 3, timeout=15)
    assert rs.status_writes() == writes

    # The counter is not blind: a real change (a deployment's message) is written, once.
    dashboard.set_deployment_status(APP, DEPLOYMENT, "HEALTHY", "scaled to 2 replicas")

    def message_recorded(o: dict[str, Any]) -> bool:
        deps = (o["status"]["activeServiceStatus"]["applicationStatuses"][APP]
                ["serveDeploymentStatuses"])
        return deps[DEPLOYMENT].get("message") == "scaled to 2 replicas"

    rs.wait_for("RayService", NAME, message_recorded, timeout=10)
    reads = len(dashboard.requests("GET", SERVE_PATH))
    dashboard.wait_for_request("GET", SERVE_PATH, count=reads + 2, timeout=10)
    assert rs.status_writes() == writes + 1


# -- 4. more than one head Pod --------------------------------------------------------------


def test_more_than_one_head_pod_is_reported_and_blocks_the_dashboard(rayservice):
    rs = rayservice()
    cluster = rs.create()
    head = rs.head_pod(cluster)
    extra = f"{cluster}-head-extra"
    rs.k8s.core.create_namespaced_pod(rs.namespace, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": extra, "labels": {"ray.io/cluster": cluster,
                                               "ray.io/node-type": "head"}},
        "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.9.0"}]},
    })
    rs.pods.set_running(head)
    rs.pods.set_running(extra)
    dashboard = rs.dashboard(cluster).start()

    events = eventually(lambda: rs.events("InvalidHeadPodCount"), timeout=10,
                        message="no InvalidHeadPodCount event")
    assert events[0].type == "Warning"
    assert f"found 2 head Pods for RayCluster {cluster}" in events[0].message
    consistently(lambda: dashboard.journal == [] and rs.active() == ""
                 and rs.pending() == cluster, duration=HOLD_SECONDS, interval=0.25,
                 message="the Dashboard was called with two head Pods")

    # Back to one head Pod: the gate opens.
    rs.k8s.core.delete_namespaced_pod(extra, rs.namespace, grace_period_seconds=0)
    rs.wait_active(cluster)
    assert 1 <= len(dashboard.requests("PUT", SERVE_PATH)) <= rs.submissions_allowed()
