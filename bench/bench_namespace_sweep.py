"""What a test namespace's deletion costs, swept as the audit log says against every collection.

One lean plane (etcd + kube-apiserver); each round fills namespaces as a test would (two
ConfigMaps, a Secret, a Service and a Pod) and deletes each with ``delete_namespace``, in a
rotating order of two ways: ``written`` (the sweep deletes only the collections
``AuditLog.resources_written`` names, as the plugin does on a plane of its own) and
``every`` (every namespaced collection, as without an audit log).  Per namespace: the
wall time of the deletion, the CPU time etcd and kube-apiserver spent meanwhile and the
sweeping client's (this process: its sweep and its reads of the audit log), and the
``deletecollection`` calls the sweeper made (counted in the audit log, its own user).
Medians go to ``bench/results/namespace-sweep.json``.

    python -m bench.bench_namespace_sweep [--rounds 5] [--namespaces 10] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import kubernetes.client
import psutil

from bench.common import RESULTS, save_json
from envtest import ControlPlane, create_namespace, delete_namespace, namespace_name

MODES = ("written", "every")


def fill(api: kubernetes.client.ApiClient, namespace: str) -> None:
    """What a small test leaves: two ConfigMaps, a Secret, a Service, a Pod."""
    core = kubernetes.client.CoreV1Api(api)
    for name in ("settings", "records"):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": name},
                                                      "data": {"k": "v"}})
    core.create_namespaced_secret(namespace, {"metadata": {"name": "s"},
                                              "stringData": {"a": "b"}})
    core.create_namespaced_service(namespace, {"metadata": {"name": "svc"},
                                               "spec": {"ports": [{"port": 80}]}})
    core.create_namespaced_pod(namespace, {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "x"}]}})


def one_round(plane: ControlPlane, sweeper: kubernetes.client.ApiClient, mode: str,
              namespaces: int, user: str) -> list[dict[str, float]]:
    """Fill and delete ``namespaces`` namespaces the ``mode`` way; one row each."""
    admin = plane.api_client()
    servers = [psutil.Process(pid) for pid in plane.pids.values()]
    written = plane.audit_log.resources_written if mode == "written" else None
    rows = []
    for _ in range(namespaces):
        name = namespace_name(f"sweep-{mode}")
        create_namespace(admin, name)
        fill(admin, name)
        before_calls = len(plane.audit_log.calls(user=user, verb="deletecollection"))
        cpu, own, began = _cpu(servers), time.process_time(), time.monotonic()
        delete_namespace(sweeper, name, written=written)
        seconds, server_cpu = time.monotonic() - began, _cpu(servers) - cpu
        client_cpu = time.process_time() - own
        calls = len(plane.audit_log.calls(user=user, verb="deletecollection")) - before_calls
        rows.append({"seconds": seconds, "server_cpu_ms": server_cpu * 1000,
                     "client_cpu_ms": client_cpu * 1000, "deletecollections": calls})
    return rows


def _cpu(processes: list[psutil.Process]) -> float:
    return sum(p.cpu_times().user + p.cpu_times().system for p in processes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS / "namespace-sweep.json")
    arguments = parser.parse_args()
    rows: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    user = "bench-sweeper"
    with ControlPlane() as plane:
        sweeper = plane.add_user(user, ("system:masters",)).api_client()
        for round_index in range(arguments.rounds):
            for mode in MODES[round_index % 2:] + MODES[:round_index % 2]:
                rows[mode] += one_round(plane, sweeper, mode, arguments.namespaces, user)
            print(f"round {round_index + 1} done", flush=True)
    medians: dict[str, Any] = {
        mode: {key: round(statistics.median(row[key] for row in rows[mode]), 4)
               for key in ("seconds", "server_cpu_ms", "client_cpu_ms", "deletecollections")}
        for mode in MODES}
    data = {"rounds": arguments.rounds, "namespaces_per_round": arguments.namespaces,
            "medians": medians,
            "cpu_ratio": round(medians["written"]["server_cpu_ms"]
                               / medians["every"]["server_cpu_ms"], 3),
            "seconds_ratio": round(medians["written"]["seconds"]
                                   / medians["every"]["seconds"], 3)}
    save_json(arguments.out, data)
    print(data)


if __name__ == "__main__":
    main()
