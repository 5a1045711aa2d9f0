"""The seed's scenario on the real KubeRay operator, as an ordinary test of this framework.

Run by ``bench/bench_kuberay_real.py`` with ``KUBERAY_BUILDS`` (JSON: version -> binary and
module source), ``KUBERAY_DELAYS`` (seconds before the head Pod is Ready, comma separated),
``KUBERAY_RUNS`` and ``KUBERAY_RESULTS`` (a file each run appends its row to); named so that
no test run of the repository collects it.  Each run: the version's CRDs (as released), the
operator as its own user under its own ClusterRole, the version's RayService sample applied,
every Pod of it Running and Ready after the delay (``pod_simulator``), a fake Dashboard
(``services``) that refuses connections until 2 s after the head Pod is Ready and then
serves the version's Serve endpoints (and Serve's proxy its health at each Pod's IP), and
the pending cluster's promotion awaited.  The
operator's RayService status writes from creation to promotion are counted from the audit
log and joined to the changes they made (``api_calls.attributed``), so the writes that
changed only timestamps are told apart.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from envtest import eventually

BUILDS: dict[str, dict[str, str]] = json.loads(os.environ.get("KUBERAY_BUILDS", "{}"))
DELAYS = [float(d) for d in os.environ.get("KUBERAY_DELAYS", "3").split(",")]
RUNS = int(os.environ.get("KUBERAY_RUNS", "1"))
RESULTS = Path(os.environ.get("KUBERAY_RESULTS", "kuberay-results.jsonl"))
#: The Dashboard starts answering this long after the head Pod is Ready.
DASHBOARD_AFTER = 2.0
#: The dashboard agent's port, named so in the Services KubeRay makes.
AGENT_PORT = 52365
#: Ray Serve's HTTP proxy on every Pod, whose ``/-/healthz`` KubeRay asks at each Pod's IP.
SERVE_PORT = 8000
RAY = ("ray.io", "v1alpha1", "rayservices")
NOISE = ("*Time",)


class Dashboard:
    """Ray's Serve API, as much of it as KubeRay v0.5/v0.6 calls: ``PUT`` a config (single
    application: ``/api/serve/deployments/``; multi: ``/api/serve/applications/``), then
    ``GET`` its status, every deployment HEALTHY and every application RUNNING.  One state
    per Dashboard (by the host called)."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
        host = environ.get("HTTP_HOST", "").split(":")[0]
        if method == "PUT":
            size = int(environ.get("CONTENT_LENGTH") or 0)
            with self.lock:
                self.configs[host] = json.loads(environ["wsgi.input"].read(size) or b"{}")
            return self._answer(start_response, {})
        with self.lock:
            config = self.configs.get(host, {})
        if path == "/api/serve/deployments/status":
            return self._answer(start_response, {
                "app_status": {"status": "RUNNING", "message": ""},
                "deployment_statuses": [{"name": d["name"], "status": "HEALTHY", "message": ""}
                                        for d in config.get("deployments", [])]})
        if path == "/api/serve/applications/":
            return self._answer(start_response, {"deploy_mode": "MULTI_APP", "applications": {
                app["name"]: {"name": app["name"], "status": "RUNNING", "message": "",
                              "route_prefix": app.get("route_prefix", "/"),
                              "deployments": {d["name"]: {"name": d["name"], "status": "HEALTHY",
                                                          "message": ""}
                                              for d in app.get("deployments", [])}}
                for app in config.get("applications", [])}})
        if path == "/api/serve/deployments/":
            return self._answer(start_response, config)
        if path == "/-/healthz":  # Serve's proxy, on each Pod
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"success"]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [f"no {method} {path} here".encode()]

    @staticmethod
    def _answer(start_response: Any, body: dict[str, Any]) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(body).encode()]


def _cases() -> list[Any]:
    """Interleaved: each run goes through every delay and version, so drift hits all."""
    return [pytest.param(version, delay, run, id=f"run{run}-{version}-{delay:g}s")
            for run in range(1, RUNS + 1) for delay in DELAYS for version in BUILDS]


def _head_ready_at(k8s: Any, namespace: str, api_calls: Any) -> dt.datetime | None:
    """When the write that made the head Pod Ready completed (the audit log's time, to the
    microsecond): nobody could see it Ready before."""
    heads = k8s.core.list_namespaced_pod(namespace, label_selector="ray.io/node-type=head")
    for pod in heads.items:
        for attributed in api_calls.attributed(resource="pods", subresource="status",
                                               name=pod.metadata.name):
            if attributed.change is not None and "Ready" in attributed.change.state:
                return attributed.call.completed
    return None


def _status(k8s: Any, namespace: str, name: str) -> dict[str, Any]:
    group, version, plural = RAY
    found = k8s.custom.get_namespaced_custom_object(group, version, namespace, plural, name)
    return found.get("status") or {}


@pytest.mark.parametrize(("version", "head_delay", "run"), _cases())
def test_rayservice_comes_up(version: str, head_delay: float, run: int, k8s: Any,
                             namespace: str, install_crds: Any, apply: Any, run_operator: Any,
                             pod_simulator: Any, services: Any, api_calls: Any,
                             recorder: Any) -> None:
    source = Path(BUILDS[version]["source"])
    install_crds(source / "config/crd/bases")
    recorder("RayService", "Pod")
    dashboard = Dashboard()
    served = [services.serve(pattern, port=port, app=dashboard, up=False)
              for pattern, port in (("*-head-svc", AGENT_PORT), ("*-dashboard-svc", AGENT_PORT),
                                    ("*", SERVE_PORT))]
    pod_simulator(selector="ray.io/cluster", running_after=head_delay)
    operator = run_operator(
        [BUILDS[version]["binary"], "--kubeconfig", "{kubeconfig}", "--metrics-addr=0",
         "--health-probe-bind-address=0", "--enable-leader-election=false",
         f"--watch-namespace={namespace}"],
        name="kuberay", cluster_roles=source / "config/rbac/role.yaml")
    sample = yaml.safe_load((source / "config/samples/ray_v1alpha1_rayservice.yaml").read_text())
    name = sample["metadata"]["name"]
    created = dt.datetime.now(dt.UTC)
    apply(sample)

    # The Dashboard answers 2 s after the head Pod is Ready, as a starting Ray head does.
    ready_at = eventually(lambda: _head_ready_at(k8s, namespace, api_calls),
                          timeout=head_delay + 60)
    threading.Timer(DASHBOARD_AFTER, lambda: [s.up() for s in served]).start()
    pending = eventually(lambda: _status(k8s, namespace, name).get(
        "pendingServiceStatus", {}).get("rayClusterName"), timeout=30)
    eventually(lambda: _status(k8s, namespace, name).get("activeServiceStatus", {}).get(
        "rayClusterName") == pending, timeout=head_delay + 120)

    # The writes up to the one that promoted the pending cluster, each with what it changed.
    writes = eventually(lambda: _writes_to_promotion(api_calls, operator, name), timeout=10)
    promotion = writes[-1]
    calls = services.calls()
    row = {
        "version": version, "head_delay_s": head_delay, "run": run,
        "status_writes": len(writes),
        "timestamp_only_writes": sum(1 for a in writes
                                     if a.change is not None and a.change.only(NOISE)),
        "stored_nothing": sum(1 for a in writes if a.change is None),
        "dashboard_calls": len(calls),
        "dashboard_refused": sum(1 for c in calls if c.outcome == "refused"),
        "calls_before_head_ready": sum(1 for c in calls if c.at < ready_at),
        "seconds_to_promotion": round((promotion.call.completed - created).total_seconds(), 1),
        "paths": sorted({f"{c.method} {c.path}" for c in calls}),
    }
    with RESULTS.open("a") as out:
        out.write(json.dumps(row) + "\n")
    served_calls = [c for c in calls if c.outcome == "served"]
    assert served_calls, "the Dashboard was never called"
    assert all(c.at >= ready_at for c in served_calls)  # the fake refused before
    if version >= "v0.6.0":  # the seed: no Dashboard call before the head Pod is Ready
        assert row["calls_before_head_ready"] == 0, calls


def _writes_to_promotion(api_calls: Any, operator: Any, name: str) -> list[Any] | None:
    """The operator's status writes of the RayService up to and including the one that set
    ``activeServiceStatus.rayClusterName`` (None while that one is not seen yet)."""
    writes = api_calls.attributed(user=operator, resource="rayservices",
                                  subresource="status", name=name)
    for index, attributed in enumerate(writes):
        change = attributed.change
        if change is not None and any(f.path == "status.activeServiceStatus.rayClusterName"
                                      and f.new for f in change.fields):
            return writes[:index + 1]
    return None
