"""Workloads at scale on the cluster profile: 10,000 Pods (100 Deployments x 100 replicas on
100 simulated Nodes) from creation to all Ready, with the real kube-controller-manager and
kube-scheduler and the Pod lifecycle engine.  An absolute time says more about the machine
than about the engine (KWOK's own controller needs minutes for this shape on two cores), so
the figure that travels is the ratio to KWOK on the same plane.  Figures, not pass/fail:

- start: the cluster profile (etcd, kube-apiserver, kube-controller-manager with the workload
  controllers, kube-scheduler, the Nodes and the engine) until Pods can run, median of
  ``--start-runs`` starts interleaved with as many starts of the minimal profile (ratio);
- wall time from the first Deployment created until the engine made the last Pod Ready, and
  until every Deployment reports all replicas available; Pods Ready over time;
- API writes per Pod from the engine (audit log, user ``envtest:kubelet``): status writes,
  and, after scaling every Deployment to 0, deletions;
- RSS of every component and of the simulator at the end;
- the same load with KWOK's own controller (``kwok``, built from Go modules) running the
  Pods instead, interleaved (``--simulator both``, ``--pairs``): the ratio of ours to KWOK's.
  Both are timed by one neutral observer (:mod:`bench.pod_watch`), not by either's records.

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
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console

from bench.common import RESULTS, save_json
from bench.kwok import KWOK_VERSION, Kwok, KwokUnavailable, kwok_binary
from envtest import (
    CLUSTER_CONTROLLERS,
    KUBELET_USER,
    AuditLog,
    ControlPlane,
    create_namespace,
    eventually,
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


class Observer:
    """The neutral observer (:mod:`bench.pod_watch`) as a child process; ``latest`` is its
    last line: Pods seen Ready, deleted, and when the last of each happened (wall clock)."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.pod_watch", str(kubeconfig), namespace],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            cwd=Path(__file__).resolve().parent.parent)
        self.latest: dict[str, Any] = {"listed": False, "ready": 0, "deleted": 0}
        threading.Thread(target=self._read, daemon=True).start()
        eventually(self._listed, timeout=60, interval=0.1,
                   message="the Pod observer did not list the Pods")  # then it sees all

    def _listed(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"the Pod observer exited with {self.process.returncode}")
        return bool(self.latest["listed"])

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.latest = json.loads(line)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def run_load(args: argparse.Namespace, simulator: str, kwok_path: Path | None) -> dict[str, Any]:
    """One load on a fresh cluster-profile plane, Pods run by ``simulator`` (``envtest``:
    our engine in this process; ``kwok``: KWOK's controller as a process of its own)."""
    total = args.deployments * args.replicas
    with cluster_profile(apiserver_args=dict(args.apiserver_arg) or None) as cp:
        if simulator == "envtest":
            workloads = start_workloads(cp, args.nodes, events=False)
            alive, simulator_user = cp.check_alive, KUBELET_USER
            simulator_pid = os.getpid()
        else:
            assert kwok_path is not None
            kwok = Kwok(kwok_path, cp, args.nodes,
                        Path(tempfile.gettempdir()) / f"bench-kwok-{os.getpid()}.log").start()
            alive, simulator_user, simulator_pid = kwok.check_alive, "kwok", kwok.pid
        admin = cp.api_client()
        admin.configuration.connection_pool_maxsize = 16
        create_namespace(admin, NAMESPACE)
        wait_for_service_account(admin, NAMESPACE)
        observer = Observer(cp.add_user("bench-observer", ("system:masters",)).kubeconfig_path,
                            NAMESPACE)
        names = [f"d{i:03d}" for i in range(args.deployments)]
        t0 = time.time()
        for name in names:
            request(admin, "POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                    body=deployment(name, args.replicas))
        console.print(f"[{simulator}] created {len(names)} Deployments in "
                      f"{time.time() - t0:.1f} s")

        progress: list[tuple[float, int]] = []
        last = 0.0
        while time.time() - t0 < args.timeout:
            cp.check_alive()
            alive()
            ready = observer.latest["ready"]
            now = time.time()
            if now - last >= 5:
                last = now
                progress.append((round(now - t0, 1), ready))
                console.print(f"  {now - t0:6.1f} s: {ready}/{total} Pods Ready")
            if ready >= total:
                break
            time.sleep(0.2)
        seen = observer.latest
        all_ready_seconds = (seen["last_ready_at"] - t0) if seen["ready"] >= total else None
        progress.append((round(time.time() - t0, 1), seen["ready"]))

        available_seconds = None
        while time.time() - t0 < args.timeout:
            items = request(admin, "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                            timeout=60)["items"]
            if sum((d.get("status") or {}).get("availableReplicas") or 0 for d in items) >= total:
                available_seconds = time.time() - t0
                break
            time.sleep(0.5)
        console.print(f"[{simulator}] all {total} Pods Ready after {all_ready_seconds} s; "
                      f"every Deployment available after {available_seconds} s")

        rss = {name: rss_mib(pid) for name, pid in cp.pids.items()}
        rss[f"{simulator} (Pods and Node heartbeats)"] = rss_mib(simulator_pid)

        # Deletion: scale everything to 0 and let the simulator remove the Pods.
        t1 = time.time()
        for name in names:
            request(admin, "PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}"
                    "/scale", body={"spec": {"replicas": 0}},
                    content_type="application/merge-patch+json")
        deleted_seconds = None
        while time.time() - t1 < args.timeout:
            alive()
            if observer.latest["deleted"] >= total:
                deleted_seconds = observer.latest["last_deleted_at"] - t1
                break
            time.sleep(0.5)
        observer.close()
        console.print(f"[{simulator}] scaled to 0: all Pods removed after {deleted_seconds} s")

        assert cp.apiserver is not None
        every_call = AuditLog(cp.apiserver.audit_log_path).calls()
        # Requests the apiserver's in-flight limits turned away (429), by user: a test
        # plane should never throttle its own controllers.
        throttled = Counter(c.user for c in every_call if c.code == 429)
        calls = [c for c in every_call if c.user == simulator_user and c.resource == "pods"]
        by_kind = Counter(f"{c.verb} {c.resource}{'/' + c.subresource if c.subresource else ''}"
                          f" {c.code}" for c in calls)
        status_writes = sum(1 for c in calls if c.subresource == "status")
        deletes = sum(1 for c in calls if c.verb == "delete")
        if simulator == "envtest":
            errors = list(workloads.kubelet.errors)
            workloads.stop()
        else:
            errors = []
            kwok.stop()
        version = cp.version
    return {
        "simulator": simulator, "kubernetes": version,
        "load_average": os.getloadavg(),
        "all_ready_seconds": all_ready_seconds,
        "all_available_seconds": available_seconds,
        "scale_to_zero_seconds": deleted_seconds,
        "ready_over_time": progress,
        "writes_per_pod": {"status": status_writes / total, "delete": deletes / total},
        "pod_calls": dict(by_kind),
        "throttled_429_by_user": dict(throttled),
        "rss_mib": {k: round(v, 1) for k, v in rss.items()},
        "errors": errors[-10:],
    }


def compare(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per simulator and ours/KWOK ratios (below 1: ours is faster)."""
    out: dict[str, Any] = {}
    for key in ("all_ready_seconds", "all_available_seconds", "scale_to_zero_seconds"):
        medians = {}
        for name in ("envtest", "kwok"):
            values = [r[key] for r in runs if r["simulator"] == name and r[key] is not None]
            if values:
                medians[name] = round(statistics.median(values), 1)
        if len(medians) == 2:
            medians["ratio_envtest_to_kwok"] = round(medians["envtest"] / medians["kwok"], 2)
        out[key] = medians
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deployments", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--start-runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--simulator", choices=("envtest", "kwok", "both"), default="both",
                        help="who runs the Pods; 'both' alternates ours and KWOK's (default)")
    parser.add_argument("--pairs", type=int, default=1,
                        help="runs per simulator, interleaved")
    parser.add_argument("--out", type=Path, default=RESULTS / "workloads.json")
    parser.add_argument("--apiserver-arg", action="append", default=[], metavar="FLAG=VALUE",
                        type=lambda text: tuple(text.split("=", 1)),
                        help="a kube-apiserver flag for the load's plane (to compare)")
    args = parser.parse_args(argv)

    starts = measure_starts(args.start_runs) if args.start_runs else None
    if starts:
        console.print(f"start to usable, median of {args.start_runs}: cluster profile "
                      f"{starts['median_seconds']['cluster']:.2f} s, minimal "
                      f"{starts['median_seconds']['minimal']:.2f} s "
                      f"({starts['ratio_cluster_to_minimal']:.2f}x)")

    simulators = ["envtest", "kwok"] if args.simulator == "both" else [args.simulator]
    kwok_path, kwok_skipped = None, None
    if "kwok" in simulators:
        try:
            kwok_path = kwok_binary()
        except KwokUnavailable as exc:
            kwok_skipped = f"KWOK {KWOK_VERSION} skipped: {exc}"
            console.print(kwok_skipped)
            simulators.remove("kwok")
    runs = [run_load(args, name, kwok_path)
            for _ in range(args.pairs) for name in simulators]

    report = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "kubernetes": runs[0]["kubernetes"] if runs else None,
        "pods": args.deployments * args.replicas, "deployments": args.deployments,
        "nodes": args.nodes, "kwok_version": KWOK_VERSION, "kwok_skipped": kwok_skipped,
        "apiserver_args": dict(args.apiserver_arg),
        "start": starts,
        "compared": compare(runs),
        "runs": runs,
    }
    save_json(args.out, report)
    console.print_json(json.dumps(report["compared"]))
    for run in runs:
        console.print(f"{run['simulator']}: writes per Pod {run['writes_per_pod']}, RSS "
                      f"{run['rss_mib']}, 429s {run['throttled_429_by_user']}")
    console.print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
