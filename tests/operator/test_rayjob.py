"""The RayJob controller against a fake Ray Dashboard (a real HTTP server): when it submits,
how often, how it follows the job, and what happens after the job and on deletion."""

from __future__ import annotations

import time
from typing import Any

import pytest

from envtest import consistently, deleted, eventually, request

GROUP, VERSION = "ray.io", "v1"
JOBS = "/api/jobs/"
FINALIZER = "ray.io/rayjob-finalizer"


def cluster_spec(workers: int = 1) -> dict[str, Any]:
    container = {"name": "ray", "image": "rayproject/ray:2.9.0"}
    return {
        "rayVersion": "2.9.0",
        "headGroupSpec": {"rayStartParams": {},
                          "template": {"spec": {"containers": [dict(container,
                                                                    name="ray-head")]}}},
        "workerGroupSpecs": [{
            "groupName": "small-group", "replicas": workers, "minReplicas": 0,
            "maxReplicas": 5, "rayStartParams": {},
            "template": {"spec": {"containers": [dict(container, name="ray-worker")]}},
        }],
    }


def rayjob(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "entrypoint": "python -c 'print(42)'",
        "runtimeEnvYAML": "env_vars:\n  counter_name: test_counter\n",
        "metadata": {"owner": "tests"},
    }
    body.update(spec)
    if "clusterSelector" not in body:
        body.setdefault("rayClusterSpec", cluster_spec())
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RayJob", "metadata": {"name": name},
            "spec": body}


def job_status(field: str, value: Any) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        return (obj.get("status") or {}).get(field) == value

    check.__name__ = f"status.{field} == {value!r}"
    return check


def has_status(field: str) -> Any:
    def check(obj: dict[str, Any]) -> Any:
        return (obj.get("status") or {}).get(field)

    check.__name__ = f"status.{field} is set"
    return check


def cluster_pods(k8s: Any, namespace: str, cluster: str) -> list[dict[str, Any]]:
    return request(k8s.api_client, "GET", f"/api/v1/namespaces/{namespace}/pods",
                   query={"labelSelector": f"ray.io/cluster={cluster}"})["items"]


def pods_by_type(k8s: Any, namespace: str, cluster: str, workers: int = 1
                 ) -> tuple[str, list[str]]:
    def found() -> tuple[str, list[str]] | None:
        items = cluster_pods(k8s, namespace, cluster)
        heads = [p["metadata"]["name"] for p in items
                 if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
        rest = [p["metadata"]["name"] for p in items
                if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
        return (heads[0], rest) if len(heads) == 1 and len(rest) == workers else None

    return eventually(found, timeout=10, message=f"Pods of RayCluster {cluster}")


def submissions(dashboard: Any) -> list[Any]:
    """Job submissions: POST /api/jobs/ exactly (stop is POST /api/jobs/<id>/stop)."""
    return [e for e in dashboard.requests("POST", JOBS) if e.path.rstrip("/") == "/api/jobs"]


def start_job(ray_operator, apply, wait_for, dashboards, pod_simulator, name: str,
              **spec: Any) -> tuple[Any, str, str]:
    """Operator up, RayJob applied, its Pods Running+Ready, Dashboard up, job submitted.
    Returns (fake dashboard, cluster name, job id)."""
    ray_operator(job_requeue_seconds=0.2)
    apply(rayjob(name, **spec))
    job = wait_for("RayJob", name, has_status("rayClusterName"))
    cluster, job_id = job["status"]["rayClusterName"], job["status"]["jobId"]
    pod_simulator(selector=f"ray.io/cluster={cluster}")
    dashboard = dashboards[cluster].start()
    dashboard.wait_for_request("POST", JOBS, timeout=15)
    return dashboard, cluster, job_id


def test_no_jobs_api_call_while_a_pod_is_pending_then_exactly_one_submission(
        ray_operator, apply, k8s, namespace, pods, wait_for, dashboards):
    ray_operator(job_requeue_seconds=0.2)  # many chances to submit too early
    apply(rayjob("gate"))
    job = wait_for("RayJob", "gate", has_status("rayClusterName"))
    cluster, job_id = job["status"]["rayClusterName"], job["status"]["jobId"]
    dashboard = dashboards[cluster].start()  # answering from the start: only the gate holds
    head, (worker,) = pods_by_type(k8s, namespace, cluster)

    pods.set_running(head)
    # The operator has seen the head Running (its IP is in the copied cluster status) ...
    wait_for("RayJob", "gate",
             lambda o: ((o.get("status") or {}).get("rayClusterStatus") or {})
             .get("head", {}).get("podIP"))
    # ... and with the worker Pending it neither submits nor even asks the Jobs API.
    consistently(lambda: dashboard.journal == [], duration=1.5, interval=0.1,
                 message="Jobs API called while a Pod was Pending")
    assert wait_for("RayJob", "gate", has_status("jobDeploymentStatus"))["status"][
        "jobDeploymentStatus"] == "Initializing"

    all_ready_at = time.monotonic()
    pods.set_running(worker)
    (first,) = dashboard.wait_for_request("POST", JOBS, timeout=10)
    assert first.monotonic > all_ready_at
    assert first.body["entrypoint"] == "python -c 'print(42)'"
    assert first.body["submission_id"] == job_id
    assert first.body["runtime_env"] == {"env_vars": {"counter_name": "test_counter"}}
    assert first.body["metadata"] == {"owner": "tests"}

    wait_for("RayJob", "gate", job_status("jobStatus", "PENDING"))
    consistently(lambda: len(submissions(dashboard)) == 1, duration=1.5, interval=0.1,
                 message="the job was submitted more than once")
    assert set(dashboard.jobs()) == {job_id}


@pytest.mark.parametrize("final", ["SUCCEEDED", "FAILED"])
def test_status_follows_the_job_states_to_complete(ray_operator, apply, wait_for, dashboards,
                                                   pod_simulator, final):
    dashboard, cluster, job_id = start_job(ray_operator, apply, wait_for, dashboards,
                                           pod_simulator, "follow")
    pending = wait_for("RayJob", "follow", job_status("jobStatus", "PENDING"))["status"]
    assert pending["jobDeploymentStatus"] == "Running"
    assert pending["rayClusterName"] == cluster
    assert pending["dashboardURL"] == dashboard.url

    dashboard.set_job_status(job_id, "RUNNING", "running the entrypoint")
    running = wait_for("RayJob", "follow", job_status("jobStatus", "RUNNING"))["status"]
    assert running["jobDeploymentStatus"] == "Running"
    assert running["message"] == "running the entrypoint"
    assert running["startTime"]

    message = "done" if final == "SUCCEEDED" else "exit code 1"
    dashboard.set_job_status(job_id, final, message)
    done = wait_for("RayJob", "follow", job_status("jobDeploymentStatus", "Complete"))["status"]
    assert done["jobStatus"] == final
    assert done["message"] == message
    assert done["endTime"] >= done["startTime"]
    assert len(submissions(dashboard)) == 1


def test_shutdown_after_the_job_deletes_the_cluster_after_its_ttl(
        ray_operator, apply, wait_for, dashboards, pod_simulator, api_calls, namespace):
    ttl = 2
    dashboard, cluster, job_id = start_job(ray_operator, apply, wait_for, dashboards,
                                           pod_simulator, "ttl", shutdownAfterJobFinishes=True,
                                           ttlSecondsAfterFinished=ttl)
    wait_for("RayJob", "ttl", job_status("jobStatus", "PENDING"))
    dashboard.set_job_status(job_id, "SUCCEEDED")
    ended = dashboard.job(job_id)["end_time"] / 1000.0
    wait_for("RayJob", "ttl", job_status("jobDeploymentStatus", "Complete"))
    wait_for("RayCluster", cluster, deleted, timeout=15)

    (deletion,) = [c for c in api_calls.calls(verb="delete", resource="rayclusters",
                                              namespace=namespace)]
    assert deletion.name == cluster
    assert deletion.user.endswith("ray-operator") and deletion.succeeded
    # endTime has second precision, so the TTL may be counted from up to 1 s earlier.
    assert deletion.received.timestamp() - ended >= ttl - 1.0
    assert wait_for("RayJob", "ttl", has_status("jobStatus"))["status"]["jobStatus"] == \
        "SUCCEEDED"


def test_deleting_a_running_rayjob_stops_the_job_and_removes_the_finalizer(
        ray_operator, apply, k8s, namespace, wait_for, dashboards, pod_simulator):
    dashboard, _, job_id = start_job(ray_operator, apply, wait_for, dashboards, pod_simulator,
                                     "stopme")
    dashboard.set_job_status(job_id, "RUNNING")
    job = wait_for("RayJob", "stopme", job_status("jobStatus", "RUNNING"))
    assert FINALIZER in job["metadata"]["finalizers"]

    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "rayjobs", "stopme")
    (stop,) = dashboard.wait_for_request("POST", f"{JOBS}{job_id}/stop", timeout=10)
    assert stop.status == 200
    wait_for("RayJob", "stopme", deleted, timeout=10)
    assert dashboard.job(job_id)["status"] == "STOPPED"


def test_cluster_selector_uses_an_existing_cluster(ray_operator, apply, k8s, namespace,
                                                   wait_for, dashboards, pod_simulator):
    ray_operator(job_requeue_seconds=0.2)
    pod_simulator(selector="ray.io/cluster=shared")
    apply({"apiVersion": f"{GROUP}/{VERSION}", "kind": "RayCluster",
           "metadata": {"name": "shared"}, "spec": cluster_spec()})
    wait_for("RayCluster", "shared", job_status("state", "ready"))
    dashboard = dashboards["shared"].start()

    apply(rayjob("borrow", clusterSelector={"ray.io/cluster": "shared"},
                 shutdownAfterJobFinishes=True, ttlSecondsAfterFinished=0))
    (submitted,) = dashboard.wait_for_request("POST", JOBS, timeout=10)
    job = wait_for("RayJob", "borrow", job_status("jobStatus", "PENDING"))["status"]
    assert job["rayClusterName"] == "shared"
    assert submitted.body["submission_id"] == job["jobId"]
    clusters = k8s.custom.list_namespaced_custom_object(GROUP, VERSION, namespace,
                                                        "rayclusters")["items"]
    assert [c["metadata"]["name"] for c in clusters] == ["shared"], "no cluster of its own"

    # The job ends: a selected cluster is not the job's to shut down, whatever the spec says.
    dashboard.set_job_status(job["jobId"], "SUCCEEDED")
    wait_for("RayJob", "borrow", job_status("jobDeploymentStatus", "Complete"))
    consistently(lambda: k8s.custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, "rayclusters", "shared"), duration=1.0, interval=0.1)
