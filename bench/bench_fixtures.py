"""Per-test overhead of the fixtures, the controller-manager's cost, and xdist speed-up.

Figures, not pass/fail: medians and spreads over repeated runs, interleaved
where two things are compared, with the load average printed so a busy
machine is visible in the numbers.

    python -m bench.bench_fixtures [--runs N] [--suite]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

from bench.common import RESULTS, save_json
from envtest import (
    ControlPlane,
    NamespaceReaper,
    create_namespace,
    delete_namespace,
    install_crds,
    namespace_name,
    request,
)

ROOT = Path(__file__).resolve().parent.parent
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}


def describe(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return {"median": round(statistics.median(ordered), 4), "min": round(ordered[0], 4),
            "max": round(ordered[-1], 4), "iqr": round(quartiles[2] - quartiles[0], 4),
            "n": len(ordered)}


def tiny_crd(index: int) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things{index}.bench.example.com"},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
                 "names": {"plural": f"things{index}", "kind": f"Thing{index}"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def bench_namespace_and_crds(runs: int) -> dict[str, object]:
    with ControlPlane() as control_plane:
        api = control_plane.api_client()
        reaper = NamespaceReaper(control_plane.admin.api_client())
        background, synchronous, crd = [], [], []
        for index in range(runs):
            # What the namespace fixture costs a test: create + hand over to the reaper.
            name = namespace_name(f"bench-bg-{index}")
            started = time.perf_counter()
            create_namespace(api, name)
            reaper.reap(name)
            background.append(time.perf_counter() - started)
            # The strict variant: create, then delete everything and wait until gone.
            name = namespace_name(f"bench-sync-{index}")
            started = time.perf_counter()
            create_namespace(api, name)
            request(api, "POST", f"/api/v1/namespaces/{name}/configmaps", body=CONFIGMAP)
            delete_namespace(api, name)
            synchronous.append(time.perf_counter() - started)
        reaper.close()
        for index in range(min(runs, 10)):
            started = time.perf_counter()
            install_crds(api, [tiny_crd(index)])
            crd.append(time.perf_counter() - started)
    return {"namespace_background_seconds": describe(background),
            "namespace_sync_with_object_seconds": describe(synchronous),
            "crd_install_seconds": describe(crd)}


def bench_controller_manager(runs: int) -> dict[str, object]:
    plain, with_kcm, kcm_rss = [], [], []
    for _ in range(runs):
        for controllers, samples in (((), plain),
                                     (("garbagecollector", "namespace", "serviceaccount",
                                       "serviceaccount-token"), with_kcm)):
            control_plane = ControlPlane(controllers=controllers).start()
            try:
                samples.append(control_plane.start_seconds or 0.0)
                if controllers:
                    pid = control_plane.pids["kube-controller-manager"]
                    kcm_rss.append(psutil.Process(pid).memory_info().rss / 2**20)
            finally:
                control_plane.stop()
    return {"start_without_kcm_seconds": describe(plain),
            "start_with_kcm_seconds": describe(with_kcm),
            "extra_start_seconds_median": round(statistics.median(with_kcm)
                                                - statistics.median(plain), 3),
            "kcm_rss_mib": describe(kcm_rss)}


def bench_suite(paths: list[str]) -> dict[str, object]:
    timings = {}
    for workers in ("0", "2"):
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "pytest", *paths, "-q",
                                 "-p", "no:cacheprovider", "-n", workers],
                                cwd=ROOT, capture_output=True, text=True)
        timings[f"n{workers}"] = {"seconds": round(time.monotonic() - started, 1),
                                  "exit_code": result.returncode,
                                  "summary": result.stdout.strip().splitlines()[-1:]}
    timings["speedup"] = round(timings["n0"]["seconds"] / timings["n2"]["seconds"], 2)
    return timings


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--kcm-runs", type=int, default=5)
    parser.add_argument("--suite", action="store_true",
                        help="also time tests/framework with -n 0 and -n 2")
    args = parser.parse_args()
    results: dict[str, object] = {"load_average_before": os.getloadavg()}
    results["fixtures"] = bench_namespace_and_crds(args.runs)
    results["controller_manager"] = bench_controller_manager(args.kcm_runs)
    if args.suite:
        results["suite"] = bench_suite(["tests/framework"])
    results["load_average_after"] = os.getloadavg()
    save_json(RESULTS / "fixtures.json", results)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
