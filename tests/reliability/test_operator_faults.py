"""Faults around the Ray operator (issue 9): a flapping Dashboard, an operator that crashes, and
a kube-apiserver (or etcd) killed under a running operator.

These are short enough for every run, so they are not marked ``reliability``.
"""

from __future__ import annotations

import os
import re
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from envtest import MERGE_PATCH, ControlPlane, ProcessExitedError, consistently, eventually, request

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "operator" / "config" / "crd"
RBAC = ROOT / "operator" / "config" / "rbac" / "role.yaml"
GROUP, VERSION = "ray.io", "v1"
CONTAINER = {"name": "ray", "image": "rayproject/ray:2.9.0"}
SERVE_CONFIG = textwrap.dedent("""\
    applications:
      - name: fruit_app
        import_path: fruit.deployment_graph
        route_prefix: /fruit
        deployments:
          - name: MangoStand
            num_replicas: 1
          - name: PearStand
            num_replicas: 1
""")


def cluster_spec(workers: int = 1) -> dict[str, Any]:
    return {
        "rayVersion": "2.9.0",
        "headGroupSpec": {"rayStartParams": {},
                          "template": {"spec": {"containers": [dict(CONTAINER)]}}},
        "workerGroupSpecs": [{"groupName": "g", "replicas": workers, "minReplicas": 0,
                              "maxReplicas": 10, "rayStartParams": {},
                              "template": {"spec": {"containers": [dict(CONTAINER)]}}}],
    }


def served(field: str) -> Any:
    def check(obj: dict[str, Any]) -> Any:
        return ((obj.get("status") or {}).get(field) or {}).get("rayClusterName")

    check.__name__ = f"status.{field}.rayClusterName is set"
    return check


# -- a flapping Dashboard --------------------------------------------------------------------


@pytest.mark.envtest_crds(str(CRDS))
def test_flapping_dashboard_neither_crashes_nor_writes_status_per_retry(
        ray_operator, apply, wait_for, dashboards, pod_simulator, api_calls, namespace):
    # Retry every 0.1 s and give up on a Dashboard answer after 0.5 s: many failed attempts.
    op = ray_operator(service_requeue_seconds=0.1, dashboard_timeout_seconds=0.5)
    pod_simulator(selector="ray.io/is-ray-node=yes")
    apply({"apiVersion": f"{GROUP}/{VERSION}", "kind": "RayService",
           "metadata": {"name": "flappy"},
           "spec": {"serveConfigV2": SERVE_CONFIG, "rayClusterConfig": cluster_spec()}})
    cluster = served("pendingServiceStatus")(wait_for("RayService", "flappy",
                                                      served("pendingServiceStatus")))
    dashboard = dashboards[cluster]

    def refused() -> int:
        return len(re.findall(r"Connection refused", op.logs()))

    def timed_out() -> int:
        return len(re.findall(r"timed out", op.logs()))

    # 1. Not listening: connection refused.
    eventually(lambda: refused() >= 3, timeout=15, message="retries while refusing")
    # 2. Up, but every answer is a 500.
    dashboard.fail_with(500)
    dashboard.start()
    errors = dashboard.wait_for_request(count=3, timeout=10)
    assert {e.status for e in errors} == {500}
    # 3. Slow: answers after 1 s, the operator gives up after 0.5 s.
    dashboard.clear_faults()
    dashboard.set_delay(1.0)
    before = timed_out()
    eventually(lambda: timed_out() >= before + 2, timeout=15, message="retries while slow")
    # 4. Gone again.
    dashboard.refuse()
    dashboard.clear_faults()
    before = refused()
    eventually(lambda: refused() >= before + 2, timeout=15, message="retries while refusing")
    assert wait_for("RayService", "flappy", lambda o: True)["status"]["serviceStatus"] != \
        "Running"

    # 5. Healthy: the service converges on the cluster it was waiting for.
    dashboard.start()
    status = wait_for("RayService", "flappy",
                      lambda o: (o.get("status") or {}).get("serviceStatus") == "Running"
                      and served("activeServiceStatus")(o) == cluster, timeout=20)["status"]
    assert not (status.get("pendingServiceStatus") or {}).get("rayClusterName")
    op.running.check()
    # The last write of the convergence: the serve endpoints (head and worker) are counted.
    wait_for("RayService", "flappy",
             lambda o: (o.get("status") or {}).get("numServeEndpoints") == 2)

    failed_attempts = refused() + timed_out() + len(
        [e for e in dashboard.journal if e.status >= 500])
    writes = api_calls.count(user=op.user, resource="rayservices", subresource="status",
                             namespace=namespace)
    assert failed_attempts >= 10, op.logs()
    print(f"{writes} status writes for {failed_attempts} failed Dashboard calls")
    assert writes <= 6, (f"{writes} status writes for {failed_attempts} failed Dashboard "
                         f"calls:\n{api_calls.summary(user=op.user)}")

    # Converged means quiet: no more status writes, no new Serve submission. Every PUT that
    # was answered 500 or succeeded reached the Dashboard; one that timed out may not have (a
    # connection taken into the listen backlog just before refuse() closed the server is
    # never handled). The slow ones are journaled only once their delay is over, so wait.
    logs = op.logs()
    answered = sum(len(re.findall(pattern, logs)) for pattern in (
        r"PUT \S+: HTTP 500", r"submitted the Serve config"))
    timed_out_puts = len(re.findall(r"PUT \S+: timed out", logs))
    dashboard.wait_for_request("PUT", "/api/serve/applications/", count=answered, timeout=5)
    consistently(lambda: len(dashboard.requests("PUT", "/api/serve/applications/"))
                 <= answered + timed_out_puts, duration=1.2, interval=0.2)
    puts = dashboard.requests("PUT", "/api/serve/applications/")
    assert len(re.findall(r"submitted the Serve config", logs)) == 1
    mark = api_calls.mark()
    consistently(lambda: api_calls.count(user=op.user, resource="rayservices",
                                         subresource="status", since=mark) == 0
                 and len(dashboard.requests("PUT", "/api/serve/applications/")) == len(puts),
                 duration=1.5, interval=0.25)


# -- an operator that crashes inside a test ---------------------------------------------------

# pytester points HOME at a temporary directory; the inner run must still find the binaries.
REAL_DATA_HOME = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")

INNER = textwrap.dedent('''
    import threading

    from envtest import eventually
    from ray_operator import Operator, OperatorConfig


    def crashing_operator(api_client, stop):
        # No Ray CRDs in this session: the operator gives up on its caches and raises.
        config = OperatorConfig(namespace="default", cache_sync_timeout_seconds=0.5)
        Operator(api_client, config).run(stop)


    def test_operator_crashes(run_operator, namespace):
        run_operator(crashing_operator, name="doomed")
        eventually(lambda: False, timeout=60, message="waiting on a doomed operator")


    def test_next_test_starts_clean(run_operator, namespace, k8s):
        alive = [t.name for t in threading.enumerate() if t.name.startswith("operator-")]
        assert alive == [], alive
        run_operator(lambda api_client, stop: stop.wait(), name="calm")
        eventually(lambda: k8s.core.read_namespace(namespace), timeout=5)
        assert k8s.core.list_namespaced_pod(namespace).items == []
''')


def test_operator_crash_is_reported_with_its_traceback_and_the_next_test_starts_clean(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", REAL_DATA_HOME)
    monkeypatch.setenv("ENVTEST_INSTALLED_ONLY", "1")
    for variable in ("ENVTEST_ARTIFACTS", "USE_EXISTING_CLUSTER", "ENVTEST_BACKEND",
                     "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(variable, raising=False)
    pytester.makepyfile(test_inner=INNER)
    started = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    took = time.monotonic() - started
    output = result.stdout.str()

    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*test_inner.py::test_operator_crashes*OperatorCrashed*"])
    assert "operator 'doomed' crashed" in output
    assert "Traceback (most recent call last)" in output
    # The operator's own frames and its own error, not only the test's.
    assert re.search(r'ray_operator/manager\.py", line \d+, in run', output), output
    assert "cache of rayclusters.ray.io not synced" in output
    assert "are the CRDs installed" in output
    # Noticed at once by the watchdog, not by running into the 60 s wait.
    assert "not met within 60" not in output
    assert took < 50, f"the inner run took {took:.0f} s"
    # The report carries the operator's logs too (the plugin's diagnostics).
    assert "envtest: operator doomed logs" in output


# -- the control plane dies under a running operator -------------------------------------------


@pytest.fixture
def own_control_plane(make_control_plane) -> ControlPlane:
    """A control plane of this test's own (it is killed on purpose), watched like the
    session's: every wait fails as soon as one of its processes dies."""
    return make_control_plane(crds=[CRDS])


def workers(api_client: Any, namespace: str, cluster: str) -> int:
    # A short timeout: with etcd dead the apiserver would hold the request, and a wait only
    # notices a dead process between two calls of its condition.
    items = request(api_client, "GET", f"/api/v1/namespaces/{namespace}/pods",
                    query={"labelSelector": f"ray.io/cluster={cluster},"
                                            "ray.io/node-type=worker"}, timeout=1.0)["items"]
    return len([p for p in items if not p["metadata"].get("deletionTimestamp")])


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_killed_control_plane_fails_fast_and_the_operator_recovers_after_restart(
        own_control_plane: ControlPlane, ray_operator: Any, component: str) -> None:
    cp = own_control_plane
    admin = cp.api_client()
    namespace = "survivor"
    request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    running = ray_operator(cluster=cp, name="survivor", namespace=namespace,
                           controllers=("raycluster",), error_requeue_seconds=0.2).running
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/rayclusters"
    request(admin, "POST", path, body={"apiVersion": f"{GROUP}/{VERSION}",
                                       "kind": "RayCluster", "metadata": {"name": "rc"},
                                       "spec": cluster_spec(1)})
    eventually(lambda: workers(admin, namespace, "rc") == 1, timeout=10)

    os.kill(cp.pids[component], signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(ProcessExitedError) as died:
        eventually(lambda: workers(admin, namespace, "rc") == 5, timeout=60,
                   message="a wait that cannot succeed")
    assert time.monotonic() - started < 5, "the death must fail the wait at once"
    assert died.value.name == component
    assert f"{component} exited with code -9" in str(died.value)
    running.check()  # the operator itself survives the outage

    cp.restart(component)
    request(admin, "PATCH", f"{path}/rc", content_type=MERGE_PATCH,
            body={"spec": {"workerGroupSpecs": cluster_spec(3)["workerGroupSpecs"]}})
    eventually(lambda: workers(admin, namespace, "rc") == 3, timeout=30,
               message="the operator never converged after the restart")
    consistently(lambda: workers(admin, namespace, "rc") == 3, duration=0.5)
    running.check()
