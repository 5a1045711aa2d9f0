"""Memory and start of one control plane: the "lean" footprint (the default) vs "full"
(kube-apiserver's own defaults), the same binaries, interleaved starts.

For each start: seconds until usable by the admin (the plugin's default readiness), then,
once every readiness check passed and ``--settle`` seconds more went by, the RSS of etcd
and kube-apiserver, and their anonymous memory (RSS without the binaries' file pages, which
every plane of the same version shares: what one more plane, an xdist worker's, costs).
Medians and the lean/full ratio.  Writes
``bench/results/footprint.json``.

    python -m bench.bench_footprint [--runs 5] [--settle 5]

``--go-runtime`` runs the lean footprint under Go runtime settings instead (what the
start's time and memory are traded between: ``GOGC`` and ``GOMEMLIMIT`` for etcd and
kube-apiserver, as the environment hands them on), interleaved, into
``bench/results/footprint-go-runtime.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console

from bench.common import RESULTS, save_json
from envtest import ControlPlane, create_namespace, request

console = Console()


#: Go runtime settings ``--go-runtime`` compares (the lean default is GOGC=50).
GO_RUNTIMES: dict[str, dict[str, str]] = {
    "GOGC=50 (lean)": {"GOGC": "50"},
    "GOGC=400": {"GOGC": "400"},
    "GOGC=200 GOMEMLIMIT=100MiB": {"GOGC": "200", "GOMEMLIMIT": "100MiB"},
    "GOGC=100 GOMEMLIMIT=90MiB": {"GOGC": "100", "GOMEMLIMIT": "90MiB"},
}


def one_start(footprint: str, settle: float, objects: int,
              go_runtime: dict[str, str] | None = None) -> dict[str, float]:
    kept = {name: os.environ.get(name) for name in ("GOGC", "GOMEMLIMIT")}
    os.environ.update(go_runtime or {})
    try:
        return _measured_start(footprint, settle, objects)
    finally:
        for name, value in kept.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _measured_start(footprint: str, settle: float, objects: int) -> dict[str, float]:
    started = time.monotonic()
    with ControlPlane(footprint=footprint, readiness="admin") as cp:
        start = time.monotonic() - started
        cp.wait_fully_ready()
        time.sleep(settle)  # a figure at a fixed age: the Go heap settles after the bootstrap
        figures = {"start_seconds": start, **memory(cp.pids)}
        if objects:
            load(cp, objects)
            time.sleep(settle)
            figures.update({f"loaded_{key}": value for key, value in memory(cp.pids).items()})
    return figures


def memory(pids: dict[str, int]) -> dict[str, float]:
    rss = {name: psutil.Process(pid).memory_info().rss / 2**20 for name, pid in pids.items()}
    anonymous = {name: anonymous_mib(pid) for name, pid in pids.items()}
    return {"etcd_mib": rss["etcd"], "apiserver_mib": rss["kube-apiserver"],
            "total_mib": rss["etcd"] + rss["kube-apiserver"],
            "etcd_anon_mib": anonymous["etcd"], "apiserver_anon_mib": anonymous["kube-apiserver"],
            "total_anon_mib": anonymous["etcd"] + anonymous["kube-apiserver"]}


def load(cp: ControlPlane, objects: int) -> None:
    """``objects`` ConfigMaps of about 1 KB each in one namespace, then one list of them."""
    client = cp.api_client()
    try:
        create_namespace(client, "load")
        path = "/api/v1/namespaces/load/configmaps"
        for index in range(objects):
            request(client, "POST", path, body={
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{index}"},
                "data": {"value": f"{index:06d}" * 170}})
        assert len(request(client, "GET", path, timeout=60)["items"]) == objects
    finally:
        client.close()


def anonymous_mib(pid: int) -> float:
    """The process's anonymous resident memory (Linux): RSS without the binary's file pages,
    which every plane of the same version shares; what one more plane costs."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--objects", type=int, default=1000,
                        help="objects for the figure under load (0: at ready only)")
    parser.add_argument("--out", type=Path, default=RESULTS / "footprint.json")
    parser.add_argument("--go-runtime", action="store_true",
                        help="lean under each of GO_RUNTIMES instead of lean vs full")
    args = parser.parse_args(argv)
    if args.go_runtime:
        return go_runtimes(args)
    runs: dict[str, list[dict[str, float]]] = {"full": [], "lean": []}
    for index in range(args.runs):
        for footprint in (("full", "lean") if index % 2 == 0 else ("lean", "full")):
            figures = one_start(footprint, args.settle, args.objects)
            runs[footprint].append(figures)
            console.print(f"[{index}] {footprint:4}: start {figures['start_seconds']:.2f} s, "
                          f"etcd {figures['etcd_mib']:.0f} MiB + apiserver "
                          f"{figures['apiserver_mib']:.0f} MiB = {figures['total_mib']:.0f} MiB "
                          f"(anonymous {figures['total_anon_mib']:.0f} MiB)"
                          + (f"; with {args.objects} objects {figures['loaded_total_mib']:.0f}"
                             f" MiB (anonymous {figures['loaded_total_anon_mib']:.0f} MiB)"
                             if args.objects else ""))
    medians: dict[str, dict[str, float]] = {
        footprint: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for footprint, results in runs.items()}
    report: dict[str, Any] = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "runs": runs, "medians": medians,
        "ratio_lean_to_full": {key: medians["lean"][key] / medians["full"][key]
                               for key in medians["lean"]},
    }
    save_json(args.out, report)
    console.print_json(json.dumps({"medians": medians,
                                   "ratio_lean_to_full": report["ratio_lean_to_full"]}))
    return 0


def go_runtimes(args: argparse.Namespace) -> int:
    """The lean plane under each Go runtime setting, interleaved (a rotating order)."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in GO_RUNTIMES}
    names = list(GO_RUNTIMES)
    for index in range(args.runs):
        for name in names[index % len(names):] + names[:index % len(names)]:
            figures = one_start("lean", args.settle, 0, GO_RUNTIMES[name])
            runs[name].append(figures)
            console.print(f"[{index}] {name}: start {figures['start_seconds']:.2f} s, "
                          f"anonymous {figures['total_anon_mib']:.0f} MiB")
    medians = {name: {key: statistics.median(r[key] for r in results) for key in results[0]}
               for name, results in runs.items()}
    out = args.out if args.out != RESULTS / "footprint.json" else \
        RESULTS / "footprint-go-runtime.json"
    save_json(out, {"when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
                    "settle_seconds": args.settle, "runs": runs, "medians": medians})
    for name, median in medians.items():
        console.print(f"{name}: start {median['start_seconds']:.2f} s, anonymous "
                      f"{median['total_anon_mib']:.0f} MiB (apiserver "
                      f"{median['apiserver_anon_mib']:.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
