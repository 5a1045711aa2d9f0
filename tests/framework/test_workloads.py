"""The "cluster" profile: workloads come alive without a kubelet (real scheduler, real
controllers, simulated Nodes, the Pod lifecycle engine)."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes.client
import psutil
import pytest
from framework_helpers import KUBECTL, LineReader, assert_gone, survivors
from kubernetes.stream import portforward

import envtest
from envtest import PodPlan

pytestmark = pytest.mark.envtest_profile("cluster")

ENGINE_USER = "envtest:kubelet"


def _deployment(name: str, replicas: int, image: str = "nginx:1") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"t": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def _pods(k8s: envtest.Clients, namespace: str, selector: str) -> list[Any]:
    return k8s.core.list_namespaced_pod(namespace, label_selector=selector).items


def _condition(obj: Any, kind: str) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def test_deployment_becomes_available_with_one_status_write_per_pod(
        apply, wait_for, k8s, namespace, kubelet, api_calls) -> None:
    apply(_deployment("web", 3))
    deployment = wait_for("Deployment", "web",
                          lambda d: d.status.get("availableReplicas") == 3, timeout=30)
    assert deployment.status.readyReplicas == 3
    pods = _pods(k8s, namespace, "app=web")
    assert len(pods) == 3
    node_names = {n.metadata.name for n in k8s.core.list_node().items}
    for pod in pods:
        assert pod.spec.node_name in node_names  # bound by the real kube-scheduler
        assert pod.status.phase == "Running"
        assert kubelet.states(pod.metadata.name) == ["Running", "Ready"]
        assert pod.status.host_ip == "127.0.0.1"  # the Node's InternalIP (its kubelet API)
    # Running and Ready in one write each: the engine writes from the watched object.
    writes = api_calls.count(user=ENGINE_USER, resource="pods", subresource="status",
                             namespace=namespace, succeeded=True)
    assert writes == 3


def test_scale_down_deletes_gracefully_and_rolling_update_replaces(
        apply, wait_for, k8s, namespace, kubelet) -> None:
    apply(_deployment("api", 3))
    wait_for("Deployment", "api", lambda d: d.status.get("availableReplicas") == 3, timeout=30)
    first = {p.metadata.name for p in _pods(k8s, namespace, "app=api")}

    k8s.apps.patch_namespaced_deployment_scale("api", namespace, {"spec": {"replicas": 1}})
    envtest.eventually(lambda: len(_pods(k8s, namespace, "app=api")) == 1, timeout=30)
    removed = first - {p.metadata.name for p in _pods(k8s, namespace, "app=api")}
    assert len(removed) == 2
    for name in removed:  # a deletionTimestamp, then the engine removed it as a kubelet does
        envtest.eventually(lambda n=name: kubelet.states(n)[-1:] == ["Deleted"], timeout=10)

    apply(_deployment("api", 3, image="nginx:2"))
    deployment = wait_for("Deployment", "api", lambda d: d.status.get("updatedReplicas") == 3
                          and d.status.get("availableReplicas") == 3
                          and d.status.get("replicas") == 3, timeout=60)
    assert deployment.status.observedGeneration == deployment.metadata.generation
    # The Deployment counts no terminating Pod: an old one may still be in its grace period.
    live = [p for p in _pods(k8s, namespace, "app=api") if p.metadata.deletion_timestamp is None]
    assert {p.spec.containers[0].image for p in live} == {"nginx:2"} and len(live) == 3
    envtest.eventually(lambda: {p.spec.containers[0].image
                                for p in _pods(k8s, namespace, "app=api")} == {"nginx:2"},
                       timeout=30, message="the old Pods removed after their grace period")
    assert not first & {p.metadata.name for p in _pods(k8s, namespace, "app=api")}


def test_job_completes_and_a_failing_plan_exhausts_its_backoff_limit(
        apply, wait_for, namespace, kubelet) -> None:
    template = {"spec": {"restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "busybox"}]}}
    apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ok"},
           "spec": {"completions": 3, "parallelism": 2, "template": template}})
    done = wait_for("Job", "ok", lambda j: _condition(j, "Complete") == "True", timeout=60)
    assert done.status.succeeded == 3

    kubelet.plan("batch.kubernetes.io/job-name=bad", outcome="failed", exit_code=3)
    apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
           "spec": {"backoffLimit": 0, "template": template}})
    failed = wait_for("Job", "bad", lambda j: _condition(j, "Failed") == "True", timeout=60)
    reasons = [c["reason"] for c in failed.status.conditions if c["type"] == "Failed"]
    assert reasons == ["BackoffLimitExceeded"]


def test_statefulset_starts_in_order(apply, wait_for, namespace, kubelet) -> None:
    kubelet.plan("app=db", ready_after=0.3)
    apply({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
           "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}},
                                 "spec": {"containers": [{"name": "c", "image": "pg"}]}}}})
    wait_for("StatefulSet", "db", lambda s: s.status.get("readyReplicas") == 3, timeout=60)
    moves = [(t.pod, t.state) for t in kubelet.transitions]
    assert moves == [("db-0", "Running"), ("db-0", "Ready"), ("db-1", "Running"),
                     ("db-1", "Ready"), ("db-2", "Running"), ("db-2", "Ready")]


def test_daemonset_runs_on_every_node(apply, wait_for, k8s, namespace, nodes) -> None:
    extra = nodes(2, labels={"pool": "extra"})
    apply({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
           "spec": {"selector": {"matchLabels": {"app": "agent"}},
                    "template": {"metadata": {"labels": {"app": "agent"}},
                                 "spec": {"containers": [{"name": "c", "image": "agent"}]}}}})
    all_nodes = {n.metadata.name for n in k8s.core.list_node().items}
    assert set(extra.names) <= all_nodes
    wait_for("DaemonSet", "agent", lambda d: d.status.get("numberReady") == len(all_nodes)
             and d.status.get("desiredNumberScheduled") == len(all_nodes), timeout=60)
    placed = [p.spec.node_name for p in _pods(k8s, namespace, "app=agent")]
    assert sorted(placed) == sorted(all_nodes)


def test_taint_keeps_pod_pending_with_the_schedulers_reason(
        k8s, namespace, nodes, wait_for) -> None:
    gpu = nodes(1, labels={"pool": "gpu"},
          taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    k8s.core.create_namespaced_pod(namespace, _pod("tainted", nodeSelector={"pool": "gpu"}))
    with pytest.raises(envtest.WaitTimeoutError) as waited:
        wait_for("Pod", "tainted", lambda p: p.spec.get("nodeName"), timeout=5)
    assert "untolerated taint" in str(waited.value)  # the scheduler's own words
    events = k8s.core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=tainted").items
    assert any(e.reason == "FailedScheduling" and "untolerated taint" in e.message
               for e in events)

    k8s.core.create_namespaced_pod(namespace, _pod("tolerant", nodeSelector={"pool": "gpu"},
                                                   tolerations=[{"key": "dedicated",
                                                                 "operator": "Exists"}]))
    ready = wait_for("Pod", "tolerant", envtest.pod_is_ready, timeout=20)
    assert ready.spec.nodeName == gpu.names[0]


def test_pod_without_room_names_the_shortage(k8s, namespace, wait_for) -> None:
    huge = _pod("huge")
    huge["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500"}}
    k8s.core.create_namespaced_pod(namespace, huge)
    with pytest.raises(envtest.WaitTimeoutError, match="Insufficient cpu"):
        wait_for("Pod", "huge", envtest.pod_is_ready, timeout=5)


def test_bare_pod_gets_the_default_service_account_token(k8s, namespace, wait_for) -> None:
    k8s.core.create_namespaced_pod(namespace, _pod("bare"))
    pod = wait_for("Pod", "bare", envtest.pod_is_ready, timeout=20)
    assert pod.spec.serviceAccountName == "default"
    projected = [v for v in pod.spec.volumes if v["name"].startswith("kube-api-access-")]
    assert projected and any("serviceAccountToken" in s
                             for s in projected[0]["projected"]["sources"])


def test_readiness_gate_holds_ready_until_its_condition_is_true(
        k8s, namespace, wait_for, kubelet) -> None:
    gate = "example.com/load-balancer"
    k8s.core.create_namespaced_pod(namespace, _pod("gated", readinessGates=[
        {"conditionType": gate}]))
    running = wait_for("Pod", "gated", lambda p: p.status.get("phase") == "Running", timeout=20)
    assert _condition(running, "ContainersReady") == "True"
    assert _condition(running, "Ready") == "False"
    status = dict(running.status)
    status["conditions"] = [*status["conditions"], {"type": gate, "status": "True"}]
    k8s.core.patch_namespaced_pod_status("gated", namespace, {"status": {
        "conditions": status["conditions"]}})
    wait_for("Pod", "gated", envtest.pod_is_ready, timeout=10)
    assert kubelet.states("gated") == ["Running", "Ready"]


def test_a_pod_its_plan_keeps_unready_turns_ready_when_the_test_says(
        k8s, namespace, wait_for, kubelet) -> None:
    """``kubelet.ready``: the write is the engine's (its user, as every status write of
    its), so what judges an operator by who wrote what counts it as the cluster's."""
    kubelet.plan("t=db", PodPlan(outcome="running"))
    with pytest.raises(envtest.ResourceError, match="/db is not one of the simulated Nod"):
        kubelet.ready("db")  # not made yet
    k8s.core.create_namespaced_pod(namespace, _pod("db"))
    running = wait_for("Pod", "db", lambda p: p.status.get("phase") == "Running", timeout=20)
    assert _condition(running, "Ready") == "False"
    kubelet.ready("db")
    ready = wait_for("Pod", "db", envtest.pod_is_ready, timeout=10)
    assert _condition(ready, "ContainersReady") == "True"
    kubelet.ready("db")  # ready already: nothing more
    assert kubelet.states("db") == ["Running", "Ready"]
    managers = {entry["manager"] for entry in ready.metadata.get("managedFields") or []
                if entry.get("subresource") == "status"}
    assert managers == {"envtest-kubelet"}, managers


def test_ready_asked_before_the_pod_runs_is_kept_until_it_does(
        k8s, namespace, wait_for, kubelet) -> None:
    """A Pod whose Running a reader saw a moment before the engine recorded it (or one
    still Pending) turns ready once it runs: the request is not lost, nor refused."""
    kubelet.plan("t=late", PodPlan(outcome="running", running_after=2.0))
    k8s.core.create_namespaced_pod(namespace, _pod("late"))

    def asked() -> bool:
        try:
            kubelet.ready("late")  # Pending for 2 s yet
        except envtest.ResourceError:
            return False  # not seen by the engine yet
        return True

    envtest.eventually(asked, timeout=10)
    assert _condition(k8s.core.read_namespaced_pod("late", namespace).to_dict(), "Ready") \
        != "True"
    wait_for("Pod", "late", envtest.pod_is_ready, timeout=20)
    assert kubelet.states("late") == ["Running", "Ready"]


def test_init_containers_then_crash_loop_with_growing_back_off(
        k8s, namespace, wait_for, kubelet) -> None:
    kubelet.plan("t=flaky", init_after=0.3, outcome="crashloop", crash_every=0.2,
                 crash_backoff=2.0, max_crashes=3)
    k8s.core.create_namespaced_pod(namespace, _pod(
        "flaky", initContainers=[{"name": "setup", "image": "busybox"}]))
    pod = wait_for("Pod", "flaky",
                   lambda p: (p.status.get("containerStatuses") or [{}])[0].get(
                       "restartCount") == 3, timeout=20)
    assert pod.status.initContainerStatuses[0]["state"]["terminated"]["reason"] == "Completed"
    envtest.eventually(lambda: kubelet.states("flaky") == [
        "Initializing", "Running", "CrashLoopBackOff", "CrashLoopBackOff", "CrashLoopBackOff"])
    crashes = [t.at for t in kubelet.transitions if t.state == "CrashLoopBackOff"]
    gaps = [later - earlier for earlier, later in zip(crashes, crashes[1:], strict=False)]
    assert gaps[1] > gaps[0] * 1.5  # 0.4 s, then 0.8 s
    events = {e.reason for e in k8s.core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=flaky").items}
    assert {"Pulling", "Pulled", "Created", "Started", "BackOff"} <= events


def test_same_seed_same_order(k8s, namespace, wait_for, kubelet) -> None:
    plan = PodPlan(jitter=4.0)
    candidates = [f"p{i}" for i in range(12)]
    # Five names whose drawn delays lie at least 0.5 s apart: the order then cannot
    # depend on when the scheduler happened to bind each one.
    chosen: list[str] = []
    for name in sorted(candidates, key=lambda n: kubelet.jitter_of(n, plan)):
        if not chosen or kubelet.jitter_of(name, plan) - kubelet.jitter_of(chosen[-1], plan) > 0.5:
            chosen.append(name)
    chosen = chosen[:4]
    assert len(chosen) >= 3
    kubelet.plan("t", plan)
    for name in reversed(chosen):
        k8s.core.create_namespaced_pod(namespace, _pod(name))
    for name in chosen:
        wait_for("Pod", name, envtest.pod_is_ready, timeout=20)
    order = [t.pod for t in kubelet.transitions if t.state == "Running"]
    assert order == chosen
    # A pure function of seed and name: another engine with the same seed draws the same.
    again = envtest.Kubelet(k8s.api_client, seed=kubelet.engine.seed)
    other = envtest.Kubelet(k8s.api_client, seed=kubelet.engine.seed + 1)
    assert [again.jitter_of(n, plan) for n in chosen] == [kubelet.jitter_of(n, plan)
                                                         for n in chosen]
    assert [other.jitter_of(n, plan) for n in chosen] != [kubelet.jitter_of(n, plan)
                                                         for n in chosen]


def test_node_heartbeats_not_ready_and_removal(k8s, nodes, wait_for) -> None:
    fleet = nodes(1, renew_seconds=0.2)
    name = fleet.names[0]
    coordination = envtest.request
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
    first = coordination(k8s.api_client, "GET", path)["spec"]["renewTime"]
    envtest.eventually(lambda: coordination(k8s.api_client, "GET", path)["spec"]["renewTime"]
                       != first, timeout=15)
    fleet.set_ready(name, False)
    node = wait_for("Node", name, lambda n: _condition(n, "Ready") == "False", namespace=None)
    assert node.status.nodeInfo["kubeletVersion"]
    fleet.remove(name)
    wait_for("Node", name, envtest.deleted, namespace=None)


def test_each_lease_keeps_its_own_period(k8s, nodes) -> None:
    """Leases are renewed a period after their own last renewal, not in rounds over all
    Nodes (rounds stretched the period to 16-27 s at 100 Nodes under load, and renewed
    every Lease together: two Nodes registered half a period apart ended 0.005 s apart)."""
    fleet = nodes(1, renew_seconds=1.0)
    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{}"

    def renewed(name: str) -> dt.datetime:
        spec = envtest.request(k8s.api_client, "GET", lease.format(name))["spec"]
        return dt.datetime.fromisoformat(spec["renewTime"].replace("Z", "+00:00"))

    def phase(later: str, earlier: str) -> float:
        return (renewed(later) - renewed(earlier)).total_seconds() % 1.0

    first = fleet.names[0]
    for _ in range(4):  # a Node registered well apart in phase (a busy machine may delay
        added = time.monotonic()  # the add by most of a period: then another one)
        while time.monotonic() - added < 0.5:
            time.sleep(0.05)
        fleet.add(1)
        second = fleet.names[-1]
        registered_at = renewed(second)
        apart = phase(second, first)
        if 0.25 < apart < 0.75:
            break
    else:
        pytest.fail(f"no Node registered between a quarter and three quarters of a period "
                    f"after the first in 4 tries (last {apart:.2f})")
    envtest.eventually(lambda: (renewed(second) - registered_at).total_seconds() > 1.5,
                       timeout=10)  # each renewed a few times since
    drift = abs(phase(second, first) - apart)
    assert min(drift, 1.0 - drift) < 0.25, (apart, phase(second, first))  # still apart
    assert fleet.heartbeat_lateness and max(fleet.heartbeat_lateness) < 0.5


def test_the_engines_later_writes_keep_what_its_earlier_ones_set(
        apply, wait_for, k8s, namespace, kubelet) -> None:
    """The engine keeps a skeleton of each Pod between steps (metadata it needs, containers'
    names and images, the status whole), not the whole object: a later status write must
    still carry what an earlier one set, and leave the rest of the Pod as it was."""
    pod = _pod("full", volumes=[{"name": "data", "emptyDir": {}}])
    pod["metadata"]["annotations"] = {"note": "x" * 10_000}
    pod["spec"]["containers"][0].update({
        "env": [{"name": "MODE", "value": "primary"}], "command": ["serve", "--port=80"],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}]})
    kubelet.plan("t=full", PodPlan(ready_after=0.5))  # two writes: Running, then Ready
    apply(pod)
    running = wait_for("Pod", "full", lambda p: p.status.get("phase") == "Running",
                       timeout=30).to_dict()
    ready = wait_for("Pod", "full", envtest.pod_is_ready, timeout=30).to_dict()
    assert kubelet.states("full") == ["Running", "Ready"]
    for key in ("podIP", "hostIP", "startTime"):
        assert ready["status"][key] == running["status"][key], key
    assert (ready["status"]["containerStatuses"][0]["containerID"]
            == running["status"]["containerStatuses"][0]["containerID"])
    assert ready["spec"] == running["spec"]
    for key in ("labels", "annotations", "uid"):
        assert ready["metadata"][key] == running["metadata"][key]


def test_plan_that_matches_nothing_is_reported(kubelet, k8s, namespace, wait_for) -> None:
    view = envtest.NamespaceKubelet(kubelet.engine, namespace)
    view.plan("app=typo", PodPlan(outcome="failed"))
    view.plan("t=real", PodPlan())
    k8s.core.create_namespaced_pod(namespace, _pod("real"))
    wait_for("Pod", "real", envtest.pod_is_ready, timeout=20)
    assert view.close() == ["app=typo"]


def test_unknown_controller_name_lists_the_known_ones(tmp_path) -> None:
    started = time.monotonic()
    with pytest.raises(envtest.ConfigurationError) as error:
        envtest.ControlPlane(controllers=("garbagecolector", "deployment"),
                             work_root=tmp_path).start()
    message = str(error.value)
    assert "'garbagecolector'" in message and "garbage-collector" in message
    assert "'deployment'" not in message.split("knows:")[0]
    assert time.monotonic() - started < 10
    assert not list(tmp_path.iterdir())  # nothing was made before the check


# -- envtest up --profile cluster: reproducing by hand ---------------------------------


def _apply_by_kubectl(kubeconfig: Path, manifest: dict[str, Any]) -> None:
    done = subprocess.run([str(KUBECTL), "apply", "-f", "-"], input=json.dumps(manifest),
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "KUBECONFIG": str(kubeconfig),
                               "HOME": str(kubeconfig.parent)})
    assert done.returncode == 0, done.stderr


def test_envtest_up_profile_cluster_runs_what_is_applied_by_hand(tmp_path: Path) -> None:
    up = subprocess.Popen([str(Path(sys.executable).parent / "envtest"), "up", "--profile",
                           "cluster", "--nodes", "2", "--plan", "running_after=0.5,ready_after=0.5",
                           "--kubeconfig-out", str(tmp_path / "kubeconfig")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "COLUMNS": "400"})
    children: list[psutil.Process] = []
    try:
        reader = LineReader(up)
        reader.wait_for("Press Ctrl-C", timeout=120)
        assert any(line.startswith("profile cluster: kube-scheduler, 2 simulated Nodes")
                   for line in reader.lines)
        children = list(psutil.Process(up.pid).children(recursive=True))
        assert sorted(c.name() for c in children) == [
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        kubeconfig = tmp_path / "kubeconfig"
        api = envtest.api_client_from_kubeconfig(kubeconfig)
        core = kubernetes.client.CoreV1Api(api)

        # A bare Pod from a plain client: no controller, no nodeName; it follows --plan
        # (Pending 0.5 s, then Running and not Ready 0.5 s).
        envtest.wait_for_service_account(api, "default")
        created = time.monotonic()
        core.create_namespaced_pod("default", _pod("bare"))
        pod = envtest.wait_for(api, "Pod", "bare", envtest.pod_is_ready, namespace="default",
                               timeout=20)
        assert time.monotonic() - created >= 0.95
        assert pod.spec.nodeName and pod.spec.serviceAccountName == "default"
        assert any(v["name"].startswith("kube-api-access-") for v in pod.spec.volumes)
        assert any("kubectl exec fails saying no exec handler was given" in line
                   for line in reader.lines)
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
        logs = subprocess.run([str(KUBECTL), "logs", "bare"], capture_output=True, text=True,
                              timeout=60, check=False, env=env)
        assert (logs.returncode, logs.stdout) == (0, "started\nready\n"), logs.stderr
        exec_ = subprocess.run([str(KUBECTL), "exec", "bare", "--", "true"],
                               capture_output=True, text=True, timeout=60, check=False, env=env)
        assert exec_.returncode != 0
        assert 'no exec handler for container "c" of Pod default/bare' in exec_.stderr
        # A kubectl user is told envtest up's option, not a test's plan (kubelet.plan).
        assert "run envtest up with --exec-on-host" in exec_.stderr, exec_.stderr
        assert "kubelet.plan" not in exec_.stderr, exec_.stderr

        core.create_namespace({"metadata": {"name": "shop"}})
        envtest.wait_for_service_account(api, "shop")
        web = _deployment("web", 2)
        web["metadata"]["namespace"] = "shop"
        _apply_by_kubectl(kubeconfig, web)
        envtest.wait_for(api, "Deployment", "web", lambda d: d.status.get(
            "readyReplicas") == 2, namespace="shop", timeout=30)
        _apply_by_kubectl(kubeconfig, {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "once", "namespace": "shop"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox"}]}}}})
        envtest.wait_for(api, "Job", "once", lambda j: _condition(j, "Complete") == "True",
                         namespace="shop", timeout=30)
        deleted = subprocess.run([str(KUBECTL), "delete", "namespace", "shop", "--timeout=60s"],
                                 capture_output=True, text=True, timeout=90, check=False,
                                 env={**os.environ, "KUBECONFIG": str(kubeconfig),
                                      "HOME": str(tmp_path)})
        assert deleted.returncode == 0, deleted.stderr
        api.close()

        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=30) == 0
        assert "stopped; nothing left running" in reader.rest()
        assert_gone(children, timeout=5.0, what="envtest up's children after Ctrl-C")
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        for child in survivors(children):
            child.kill()


def test_envtest_up_exec_on_host_and_forward_are_opt_in_from_the_command_line(
        tmp_path: Path) -> None:
    """``--exec-on-host`` runs ``kubectl exec`` on this machine (streamed: a shell answers
    line by line), ``--forward PORT=TARGET`` gives every Pod's port a target: what a test
    gives through its PodPlan, from the command line."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.sendall(conn.recv(100).upper())
    threading.Thread(target=serve, daemon=True).start()
    target = listener.getsockname()[1]
    up = subprocess.Popen([str(Path(sys.executable).parent / "envtest"), "up", "--profile",
                           "cluster", "--nodes", "1", "--exec-on-host", "--forward",
                           f"5432={target}", "--kubeconfig-out", str(tmp_path / "kubeconfig")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "COLUMNS": "400"})
    children: list[psutil.Process] = []
    try:
        reader = LineReader(up)
        reader.wait_for("Press Ctrl-C", timeout=120)
        children = list(psutil.Process(up.pid).children(recursive=True))
        assert any("runs the command on this machine" in line for line in reader.lines)
        assert any(f"port 5432 reaches 127.0.0.1:{target}" in line for line in reader.lines)
        kubeconfig = tmp_path / "kubeconfig"
        api = envtest.api_client_from_kubeconfig(kubeconfig)
        envtest.wait_for_service_account(api, "default")
        kubernetes.client.CoreV1Api(api).create_namespaced_pod("default", _pod("bare"))
        envtest.wait_for(api, "Pod", "bare", envtest.pod_is_ready, namespace="default",
                         timeout=20)
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
        done = subprocess.run([str(KUBECTL), "exec", "-i", "bare", "--", "sh"],
                              input="echo $((6 * 7))\nexit 5\n", capture_output=True,
                              text=True, timeout=60, check=False, env=env)
        assert (done.returncode, done.stdout) == (5, "42\n"), done.stderr
        forward = portforward(
            kubernetes.client.CoreV1Api(api).connect_get_namespaced_pod_portforward, "bare",
            "default", ports="5432")
        conn = forward.socket(5432)
        conn.settimeout(20)
        conn.sendall(b"ping")
        assert conn.recv(100) == b"PING"
        conn.close()
        api.close()
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=30) == 0
    finally:
        listener.close()
        if up.poll() is None:
            up.kill()
            up.wait()
        for child in survivors(children):
            child.kill()
