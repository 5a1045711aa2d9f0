"""Workloads at scale on the cluster profile: 10,000 Pods (100 Deployments x 100 replicas on
100 simulated Nodes) from creation to all Ready, with the real kube-controller-manager and
kube-scheduler and the Pod lifecycle engine.  KWOK's CI mark is 10,000 Pods each Ready within
60 s.  Figures, not pass/fail:

- start: the cluster profile (etcd, kube-apiserver, kube-controller-manager with the workload
  controllers, kube-scheduler, the Nodes and the engine) until Pods can run, median of
  ``--start-runs`` starts interleaved with as many starts of the minimal profile (ratio);
- wall time from the first Deployment created until the engine made the last Pod Ready, and
  until every Deployment reports all replicas available; Pods Ready over time;
- API writes per Pod from the engine (audit log, user ``envtest:kubelet``): status writes,
  and, after scaling every Deployment to 0, deletions;
- RSS of every component and of this process (which runs the engine) at the end.

Writes ``bench/results/workloads.json`` and prints a summary.

    python -m bench.bench_workloads [--deployments 100] [--replicas 100] [--nodes 100]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console

from bench.common import RESULTS, save_json
from envtest import (
    CLUSTER_CONTROLLERS,
    KUBELET_USER,
    AuditLog,
    ControlPlane,
    create_namespace,
    request,
    start_workloads,
    wait_for_service_account,
)

NAMESPACE = "scale"
console = Console()


def rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def cluster_profile(**options: Any) -> ControlPlane:
    return ControlPlane(controllers=CLUSTER_CONTROLLERS, scheduler=True, service_accounts=True,
                        **options)


def measure_starts(runs: int) -> dict[str, Any]:
    """Cluster profile vs minimal, interleaved: start until usable (profile: Nodes up too)."""
    figures: dict[str, list[float]] = {"minimal": [], "cluster": []}
    for _ in range(runs):
        for kind in ("minimal", "cluster"):
            started = time.monotonic()
            cp = cluster_profile() if kind == "cluster" else ControlPlane()
            cp.start()
            workloads = start_workloads(cp, 3, events=False) if kind == "cluster" else None
            figures[kind].append(time.monotonic() - started)
            if workloads is not None:
                workloads.stop()
            cp.stop()
    medians = {k: statistics.median(v) for k, v in figures.items()}
    return {"runs": figures, "median_seconds": medians,
            "ratio_cluster_to_minimal": medians["cluster"] / medians["minimal"]}


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deployments", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--start-runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "workloads.json")
    parser.add_argument("--apiserver-arg", action="append", default=[], metavar="FLAG=VALUE",
                        type=lambda text: tuple(text.split("=", 1)),
                        help="a kube-apiserver flag for the load's plane (to compare)")
    args = parser.parse_args(argv)
    total = args.deployments * args.replicas

    starts = measure_starts(args.start_runs) if args.start_runs else None
    if starts:
        console.print(f"start to usable, median of {args.start_runs}: cluster profile "
                      f"{starts['median_seconds']['cluster']:.2f} s, minimal "
                      f"{starts['median_seconds']['minimal']:.2f} s "
                      f"({starts['ratio_cluster_to_minimal']:.2f}x)")

    with cluster_profile(apiserver_args=dict(args.apiserver_arg) or None) as cp:
        workloads = start_workloads(cp, args.nodes, events=False)
        engine = workloads.kubelet
        admin = cp.api_client()
        admin.configuration.connection_pool_maxsize = 16
        create_namespace(admin, NAMESPACE)
        wait_for_service_account(admin, NAMESPACE)
        names = [f"d{i:03d}" for i in range(args.deployments)]
        t0 = time.monotonic()
        for name in names:
            request(admin, "POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                    body=deployment(name, args.replicas))
        console.print(f"created {len(names)} Deployments in {time.monotonic() - t0:.1f} s")

        progress: list[tuple[float, int]] = []
        last = 0.0
        ready = 0
        while time.monotonic() - t0 < args.timeout:
            cp.check_alive()
            ready = sum(1 for t in list(engine.transitions) if t.state == "Ready")
            now = time.monotonic()
            if now - last >= 5:
                last = now
                progress.append((round(now - t0, 1), ready))
                console.print(f"  {now - t0:6.1f} s: {ready}/{total} Pods Ready")
            if ready >= total:
                break
            time.sleep(0.2)
        readies = [t.at for t in engine.transitions if t.state == "Ready"]
        all_ready_seconds = (max(readies) - t0) if len(readies) >= total else None
        progress.append((round(time.monotonic() - t0, 1), ready))

        available_seconds = None
        while time.monotonic() - t0 < args.timeout:
            items = request(admin, "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                            timeout=60)["items"]
            if sum((d.get("status") or {}).get("availableReplicas") or 0 for d in items) >= total:
                available_seconds = time.monotonic() - t0
                break
            time.sleep(0.5)
        console.print(f"all {total} Pods Ready after {all_ready_seconds} s; every Deployment "
                      f"available after {available_seconds} s")

        rss = {name: rss_mib(pid) for name, pid in cp.pids.items()}
        rss["bench process (engine, Node heartbeats)"] = rss_mib(os.getpid())

        # Deletion: scale everything to 0 and let the engine remove the Pods.
        t1 = time.monotonic()
        for name in names:
            request(admin, "PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}"
                    "/scale", body={"spec": {"replicas": 0}},
                    content_type="application/merge-patch+json")
        deleted_seconds = None
        while time.monotonic() - t1 < args.timeout:
            gone = sum(1 for t in list(engine.transitions) if t.state == "Deleted")
            if gone >= total:
                deleted_seconds = time.monotonic() - t1
                break
            time.sleep(0.5)
        console.print(f"scaled to 0: all Pods removed after {deleted_seconds} s")

        every_call = AuditLog(cp.apiserver.audit_log_path).calls()
        # Requests the apiserver's in-flight limits turned away (429), by user: a test
        # plane should never throttle its own controllers.
        throttled = Counter(c.user for c in every_call if c.code == 429)
        calls = [c for c in every_call if c.user == KUBELET_USER and c.resource == "pods"]
        by_kind = Counter(f"{c.verb} {c.resource}{'/' + c.subresource if c.subresource else ''}"
                          f" {c.code}" for c in calls)
        status_writes = sum(1 for c in calls if c.subresource == "status")
        deletes = sum(1 for c in calls if c.verb == "delete")
        errors = list(engine.errors)
        workloads.stop()
        version = cp.version

    report = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average": os.getloadavg()},
        "kubernetes": version,
        "pods": total, "deployments": args.deployments, "nodes": args.nodes,
        "start": starts,
        "all_ready_seconds": all_ready_seconds,
        "all_available_seconds": available_seconds,
        "scale_to_zero_seconds": deleted_seconds,
        "ready_over_time": progress,
        "engine_writes_per_pod": {"status": status_writes / total, "delete": deletes / total},
        "engine_calls": dict(by_kind),
        "throttled_429_by_user": dict(throttled),
        "apiserver_args": dict(args.apiserver_arg),
        "rss_mib": {k: round(v, 1) for k, v in rss.items()},
        "engine_errors": errors[-10:],
    }
    save_json(args.out, report)
    console.print_json(json.dumps({k: report[k] for k in (
        "all_ready_seconds", "all_available_seconds", "scale_to_zero_seconds",
        "engine_writes_per_pod", "rss_mib", "throttled_429_by_user")}))
    console.print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
