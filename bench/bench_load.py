"""Load: one control plane, one operator (in a thread), N RayServices coming up at once.

``--proxy`` puts the operator behind a fault proxy with no fault set, as
``run_operator`` does (``bench_fault_proxy`` compares the two).

Each RayService is small (a head and one worker). A PodSimulator moves every Ray Pod (Running
after ``--running-after`` s, Ready ``--ready-after`` s later) and a FakeDashboardFleet starts each
cluster's fake Dashboard once its head Pod is Ready (``start_when_head_ready``), so the operator
meets Dashboards that refuse at first, as real heads do. The operator runs with KubeRay's
defaults (one reconcile worker per controller, 2 s RayService requeue) under its shipped
ClusterRole. Figures, not pass/fail:

- time to converge: from the first create until every RayService reports ``Running`` (and the
  per-service time from its own create), sampled every 0.25 s;
- the operator's memory: RSS growth of this process from just before the operator started to
  convergence (psutil; it includes the test doubles' growth: N fake Dashboards with a server
  thread each, the fleet's head-Pod informer and the Pod simulator), and with ``--tracemalloc``
  the Python allocations still live with ray_operator's code on their stack (excluding its test
  doubles; the fleet's head-Pod informer runs ray_operator's Informer, so its cache of the
  namespace's Pods counts too). tracemalloc slows the whole process several times over, so
  convergence times of such a run are not comparable;
- kube-apiserver's and etcd's RSS (psutil on the control plane's pids);
- the time to parse the audit log (``AuditLog.calls()`` on a fresh reader over the whole file);
- correctness: every RayService Running on the cluster it was given, and exactly one accepted
  Serve submission (PUT answered 200) in each cluster's Dashboard journal.

Writes ``bench/results/load.json`` and prints a summary.

    python -m bench.bench_load [--services 200] [--timeout 900] [--tracemalloc FRAMES]
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

from bench.common import RESULTS, save_json
from envtest import (
    CLUSTER_CONTROLLERS,
    ApiCalls,
    AuditLog,
    ConsoleProgress,
    ControlPlane,
    OperatorProxy,
    PodPlan,
    PodSimulator,
    Recorder,
    TimelineInput,
    create_namespace,
    grant_cluster_roles,
    install_crds,
    request,
    start_workloads,
    wait_for_service_account,
    write_report,
)
from ray_operator import Operator, OperatorConfig
from ray_operator.testing import FakeDashboardFleet
from ray_operator.testing.fake_dashboard import SERVE_PATH

ROOT = Path(__file__).resolve().parent.parent
CRDS = ROOT / "operator" / "config" / "crd"
RBAC = ROOT / "operator" / "config" / "rbac" / "role.yaml"
NAMESPACE = "load"
RAY = "/apis/ray.io/v1"
MB = 1024 * 1024
SERVICE_CIDR = "10.96.0.0/16"
SERVE_CONFIG = """\
applications:
  - name: app
    import_path: app.deployment
    route_prefix: /
    deployments:
      - name: Model
        num_replicas: 1
"""


def rayservice(name: str) -> dict[str, Any]:
    container = {"name": "ray", "image": "rayproject/ray:2.9.0",
                 "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}
    return {
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "serveConfigV2": SERVE_CONFIG,
            "rayClusterConfig": {
                "rayVersion": "2.9.0",
                "headGroupSpec": {"rayStartParams": {},
                                  "template": {"spec": {"containers": [dict(container)]}}},
                "workerGroupSpecs": [{"groupName": "g", "replicas": 1, "minReplicas": 0,
                                      "maxReplicas": 2, "rayStartParams": {},
                                      "template": {"spec": {"containers": [dict(container)]}}}],
            },
        },
    }


class OperatorThread:
    """The operator in a thread of this process; its logs go to a file (as a real operator's go
    to stderr), not into memory, so they do not count as its memory."""

    def __init__(self, api_client: Any, config: OperatorConfig, log_path: Path) -> None:
        self.stop_event = threading.Event()
        self.error = ""
        self.operator = Operator(api_client, config)
        self._handler = logging.FileHandler(log_path, mode="w")
        self._handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"))
        logger = logging.getLogger("ray_operator")
        logger.addHandler(self._handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        self.thread = threading.Thread(target=self._run, name="operator", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.operator.run(self.stop_event)
        except BaseException:
            self.error = traceback.format_exc()

    def check(self) -> None:
        if self.error:
            raise RuntimeError(f"the operator crashed:\n{self.error}")

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(30)
        logging.getLogger("ray_operator").removeHandler(self._handler)
        self._handler.close()


def rss(pid: int) -> int:
    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.Error:
        return 0


def operator_allocations(snapshot: tracemalloc.Snapshot) -> int:
    """Bytes still allocated with a frame of ray_operator's code on their (truncated) stack and
    none of its test doubles' or the framework's. ``Snapshot.filter_traces`` with
    ``all_frames`` takes minutes on a million traces; this walks the raw traces once."""
    total = 0
    for _domain, size, frames, *_ in snapshot.traces._traces:  # raw tuples, for speed
        ours = False
        for filename, _line in frames:
            if "/envtest/" in filename or "/ray_operator/testing/" in filename:
                ours = False
                break
            if "/ray_operator/" in filename:
                ours = True
        if ours:
            total += size
    return total


def write_timeline(path: Path, cp: ControlPlane, admin: Any, since: Any, recording: Recorder,
                   pods: Any, started: dt.datetime, services: int) -> dict[str, Any]:
    """The whole run as one timeline report, timed: gathering and judging the writes,
    rendering and writing the file, and headless Chromium loading it (where installed)."""
    began = time.monotonic()
    calls = ApiCalls(cp.audit_log, since, api_client=admin, recorders=[recording])
    writes = calls.calls(namespace=NAMESPACE, writes_only=True)
    verdicts = calls.verdicts_for(writes)
    data = TimelineInput(
        f"{services} RayServices", writes=writes, verdicts=verdicts,
        changes=list(recording.changes), transitions=list(pods.transitions) if pods else [],
        monotonic_origin=(time.monotonic(), dt.datetime.now(dt.UTC)), origin=started)
    built = time.monotonic()
    write_report(path, data)
    written = time.monotonic()
    render_seconds = None
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium:
        with tempfile.TemporaryDirectory() as profile:
            render_started = time.monotonic()
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                            f"--user-data-dir={profile}", "--dump-dom", path.resolve().as_uri()],
                           capture_output=True, timeout=600, check=True)
            render_seconds = round(time.monotonic() - render_started, 2)
    return {"path": str(path), "bytes": path.stat().st_size, "writes": len(writes),
            "redundant": sum(1 for v in verdicts.values() if v),
            "changes": len(recording.changes), "recorded_resources": len(recording.resources),
            "build_seconds": round(built - began, 2), "write_seconds": round(written - built, 2),
            "render_seconds": render_seconds}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="give up waiting for convergence after this many seconds")
    parser.add_argument("--running-after", type=float, default=0.5)
    parser.add_argument("--ready-after", type=float, default=0.5)
    parser.add_argument("--dashboard-after", type=float, default=0.2,
                        help="the Dashboard starts this long after its head Pod is Ready")
    parser.add_argument("--workers", type=int, default=1,
                        help="reconcile threads per controller (KubeRay's default: 1)")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                        help="also trace Python allocations keeping FRAMES frames each and "
                             "report those under the operator's code (slows everything down; "
                             "5 reaches the JSON decoding of the informers' caches)")
    parser.add_argument("--profile", choices=("minimal", "cluster"), default="minimal",
                        help="cluster: the Ray Pods are scheduled by kube-scheduler onto "
                        "simulated Nodes and run by the Pod lifecycle engine (instead of a "
                        "PodSimulator), with the workload controllers running")
    parser.add_argument("--nodes", type=int, default=20, help="simulated Nodes (cluster)")
    parser.add_argument("--report", type=Path, default=None, metavar="HTML",
                        help="record every change in the namespace during the run and write "
                             "the whole run's timeline report here (measures its size and "
                             "the time to build, write and render it)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--proxy", action="store_true",
                        help="the operator reaches the apiserver through a fault proxy (no "
                             "fault set), as run_operator's operators do")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = RESULTS / ("load-cluster.json" if args.profile == "cluster" else "load.json")
    console = Console(highlight=False)
    names = [f"svc-{i:03d}" for i in range(args.services)]
    load_before = os.getloadavg()
    RESULTS.mkdir(parents=True, exist_ok=True)
    # Not in bench/results: it is large and only for looking into a surprising figure.
    log_path = Path(tempfile.gettempdir()) / f"{args.out.stem}.operator.log"

    # Three Services per RayService (the cluster's head Service, the service's head and serve
    # Services): the apiserver's default range (10.0.0.0/24, as kube-apiserver's own default)
    # runs out of ClusterIPs after about 80 RayServices.
    cluster = args.profile == "cluster"
    profile_args: dict[str, Any] = {"controllers": CLUSTER_CONTROLLERS, "scheduler": True,
                                    "service_accounts": True} if cluster else {}
    with ControlPlane(progress=ConsoleProgress(console),
                      apiserver_args={"service-cluster-ip-range": SERVICE_CIDR},
                      **profile_args) as cp:
        admin = cp.api_client()
        install_crds(admin, [CRDS])
        create_namespace(admin, NAMESPACE)
        workloads = None
        if cluster:
            wait_for_service_account(admin, NAMESPACE)
            workloads = start_workloads(cp, args.nodes, events=False)
            workloads.kubelet.plan = PodPlan(running_after=args.running_after,
                                             ready_after=args.ready_after)
        user = "ray-operator-load"
        grant_cluster_roles(admin, user, RBAC)
        proxy = OperatorProxy(cp) if args.proxy else None
        identity = cp.add_user(user)
        operator_client = (proxy.issue_user(user, ()) if proxy else identity).api_client()
        operator_client.configuration.connection_pool_maxsize = 32
        fleet = FakeDashboardFleet(namespace=NAMESPACE)
        fleet.start_when_head_ready(admin, NAMESPACE, delay_seconds=args.dashboard_after)
        simulator = None if cluster else PodSimulator(
            admin, selector="ray.io/is-ray-node=yes", namespace=NAMESPACE,
            plan=PodPlan(running_after=args.running_after,
                         ready_after=args.ready_after)).start()
        apiserver_pid, etcd_pid = cp.pids["kube-apiserver"], cp.pids["etcd"]
        apiserver_rss_before, etcd_rss_before = rss(apiserver_pid), rss(etcd_pid)
        me = os.getpid()
        rss_before = rss(me)
        if args.tracemalloc:
            tracemalloc.start(args.tracemalloc)
        operator = OperatorThread(operator_client, OperatorConfig(
            namespace=NAMESPACE, dashboard_resolver=fleet.resolver, workers=args.workers),
            log_path)
        recording: Recorder | None = None
        try:
            deadline = time.monotonic() + 60
            while not operator.operator.started.is_set():
                operator.check()
                if time.monotonic() > deadline:
                    raise RuntimeError("the operator's caches never synced")
                time.sleep(0.05)

            recording = Recorder(admin, None, NAMESPACE).start() if args.report else None
            since = cp.audit_log.mark()
            started_wall = dt.datetime.now(dt.UTC)
            created: dict[str, float] = {}
            t0 = time.monotonic()
            for name in names:
                request(admin, "POST", f"{RAY}/namespaces/{NAMESPACE}/rayservices",
                        body=rayservice(name))
                created[name] = time.monotonic()
            create_seconds = time.monotonic() - t0
            console.print(f"created {len(names)} RayServices in {create_seconds:.1f} s")

            running_at: dict[str, float] = {}
            active: dict[str, str] = {}
            peak_rss = rss_before
            peak_apiserver = apiserver_rss_before
            last_report = 0.0
            while len(running_at) < len(names) and time.monotonic() - t0 < args.timeout:
                operator.check()
                cp.check_alive()
                items = request(admin, "GET", f"{RAY}/namespaces/{NAMESPACE}/rayservices",
                                timeout=60)["items"]
                now = time.monotonic()
                for item in items:
                    status = item.get("status") or {}
                    name = item["metadata"]["name"]
                    if status.get("serviceStatus") == "Running" and name not in running_at:
                        running_at[name] = now
                        active[name] = (status.get("activeServiceStatus") or {}).get(
                            "rayClusterName", "")
                peak_rss = max(peak_rss, rss(me))
                peak_apiserver = max(peak_apiserver, rss(apiserver_pid))
                if now - last_report >= 10:
                    last_report = now
                    console.print(f"  {now - t0:6.1f} s: {len(running_at)}/{len(names)} Running")
                time.sleep(0.25)
            converge_seconds = (max(running_at.values()) - t0) if running_at else None
            rss_after = rss(me)
            traced = None
            if args.tracemalloc:
                traced = operator_allocations(tracemalloc.take_snapshot())
                traced_peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            apiserver_rss_after, etcd_rss_after = rss(apiserver_pid), rss(etcd_pid)

            # Correctness: Running on the cluster it was given; one accepted Serve submission per
            # cluster; status writes of the operator.
            accepted = {
                cluster: len([e for e in fleet.dashboard(NAMESPACE, cluster).journal
                              if e.method == "PUT" and e.path == SERVE_PATH and e.status == 200])
                for cluster in (c.split("/", 1)[1] for c in fleet.clusters())
            }
            duplicates = {c: n for c, n in accepted.items() if n > 1}
            missing = sorted(n for n in names if accepted.get(active.get(n, ""), 0) == 0)
            all_requests = Counter(f"{e.method} {e.path} {e.status}"
                                   for _, e in fleet.all_requests())

            audit_path = cp.apiserver.audit_log_path
            parse_started = time.monotonic()
            calls = AuditLog(audit_path).calls()
            parse_seconds = time.monotonic() - parse_started
            audit_bytes = audit_path.stat().st_size
            operator_calls = [c for c in calls if c.user == user]
            status_writes = Counter(c.target for c in operator_calls
                                    if c.subresource == "status")
            writes_by_verb = Counter(f"{c.verb} {c.target}" for c in operator_calls)
            simulator_errors = list(simulator.errors if simulator else workloads.kubelet.errors
                                    if workloads else [])
            timeline = None
            if recording is not None:
                recording.stop()
                timeline = write_timeline(args.report, cp, admin, since, recording,
                                          simulator or (workloads.kubelet if workloads else None),
                                          started_wall, len(names))
        finally:
            if recording is not None:
                recording.stop()
            operator.stop()
            if simulator is not None:
                simulator.stop()
            if workloads is not None:
                workloads.stop()
            fleet.close()
            if proxy is not None:
                proxy.close()
        version = cp.version

    per_service = [running_at[n] - created[n] for n in running_at]
    report: dict[str, Any] = {
        "benchmark": "load: N RayServices (head + 1 worker each) on one control plane and one "
                     "operator thread",
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "kubernetes_version": version,
        "services": len(names),
        "settings": {"profile": args.profile, "proxy": args.proxy,
                     "running_after": args.running_after,
                     "ready_after": args.ready_after,
                     "dashboard_after": args.dashboard_after, "workers": args.workers,
                     "service_requeue_seconds": OperatorConfig().service_requeue_seconds,
                     "tracemalloc": args.tracemalloc, "timeout": args.timeout,
                     "service_cluster_ip_range": SERVICE_CIDR},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_average_before": load_before,
                    "load_average_after": os.getloadavg()},
        "create_seconds": round(create_seconds, 2),
        "converged": len(running_at),
        "converge_seconds": round(converge_seconds, 2) if converge_seconds else None,
        "per_service_seconds": {
            "median": round(statistics.median(per_service), 2),
            "p90": round(percentile(per_service, 0.9), 2),
            "max": round(max(per_service), 2),
        } if per_service else None,
        "memory": {
            "operator_process_rss_growth_mb": round((rss_after - rss_before) / MB, 1),
            "operator_process_peak_rss_growth_mb": round((peak_rss - rss_before) / MB, 1),
            "operator_process_rss_method": "psutil RSS of the bench process, from just before "
                                           "the operator started to convergence; includes the "
                                           "fake Dashboards and the Pod simulator",
            "operator_tracemalloc_mb": round(traced / MB, 1) if traced is not None else None,
            "tracemalloc_peak_all_mb": round(traced_peak / MB, 1)
            if args.tracemalloc else None,
            "apiserver_rss_mb": {"before": round(apiserver_rss_before / MB, 1),
                                 "after": round(apiserver_rss_after / MB, 1),
                                 "peak_sampled": round(peak_apiserver / MB, 1)},
            "etcd_rss_mb": {"before": round(etcd_rss_before / MB, 1),
                            "after": round(etcd_rss_after / MB, 1)},
        },
        "audit_log": {"bytes": audit_bytes, "calls": len(calls),
                      "parse_seconds": round(parse_seconds, 3)},
        "correctness": {
            "all_running": len(running_at) == len(names),
            "not_running": sorted(set(names) - set(running_at)),
            "clusters_with_duplicate_serve_submissions": duplicates,
            "services_without_accepted_submission": missing,
            "dashboard_requests": dict(all_requests),
            "simulator_errors": simulator_errors[:20],
        },
        "operator_writes": dict(writes_by_verb),
        "operator_status_writes": dict(status_writes),
        "operator_log": str(log_path),
        "timeline_report": timeline,
    }
    save_json(args.out, report)

    table = Table(title=f"{len(names)} RayServices, one operator thread, one control plane")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("RayServices Running", f"{len(running_at)}/{len(names)}"),
        ("time to converge (all Running)",
         f"{converge_seconds:.1f} s" if converge_seconds else "did not converge"),
        ("per service: median / p90 / max",
         " / ".join(f"{report['per_service_seconds'][k]:.1f} s" for k in ("median", "p90", "max"))
         if per_service else "-"),
        ("operator process RSS growth (peak)",
         f"{report['memory']['operator_process_rss_growth_mb']} MB "
         f"({report['memory']['operator_process_peak_rss_growth_mb']} MB)"),
        ("operator allocations (tracemalloc)",
         f"{report['memory']['operator_tracemalloc_mb']} MB" if traced is not None else "-"),
        ("kube-apiserver RSS before -> after",
         f"{report['memory']['apiserver_rss_mb']['before']} -> "
         f"{report['memory']['apiserver_rss_mb']['after']} MB"),
        ("etcd RSS before -> after", f"{report['memory']['etcd_rss_mb']['before']} -> "
                                     f"{report['memory']['etcd_rss_mb']['after']} MB"),
        ("audit log: size, calls, parse time",
         f"{report['audit_log']['bytes'] / MB:.1f} MB, {len(calls)}, {parse_seconds:.2f} s"),
        ("rayservices/status writes (per service)",
         f"{status_writes.get('rayservices/status', 0)} "
         f"({status_writes.get('rayservices/status', 0) / max(len(names), 1):.1f})"),
        ("duplicate Serve submissions", str(len(duplicates))),
        ("timeline report: size, build + write, render",
         f"{timeline['bytes'] / MB:.1f} MB, {timeline['build_seconds']:.1f} + "
         f"{timeline['write_seconds']:.1f} s, {timeline['render_seconds']} s"
         if timeline else "-"),
        ("Running without an accepted submission", str(len(missing))),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print(f"wrote {args.out} (operator log: {log_path})")
    ok = len(running_at) == len(names) and not duplicates and not missing
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
