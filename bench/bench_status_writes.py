"""Status writes while a RayService comes up, with and without the seed's head-Pod gate.

Runs the shared scenario (``bench/scenario.py``: head Pod Ready after a fixed delay, Dashboard
answering a fixed time after that) N times per setting, interleaved (gate, none, gate, none ...)
so drift on the machine hits both alike, on a real control plane with the operator running as its
own user. Counts come from the audit log. Prints median/min/max per setting and the ratio of the
medians; writes ``bench/results/status_writes.json``.

    python -m bench.bench_status_writes [--runs N] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.common import RESULTS, save_json, spread
from envtest import ConsoleProgress, ControlPlane, install_crds
from tests.support.ray_scenario import CRDS, GATES, ScenarioResult, Timing, operator_stage

KUBERAY = {"head-pod": 13, "none": 47}  # the seed's figures (cluster initialisation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per setting (default 3)")
    parser.add_argument("--out", type=Path, default=RESULTS / "status_writes.json")
    args = parser.parse_args(argv)
    # Not a terminal (CI, a pipe): wide enough that the table does not wrap.
    wide = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120
    console = Console(highlight=False, width=wide)
    timing = Timing()
    results: dict[str, list[ScenarioResult]] = {gate: [] for gate in GATES}
    load_before = os.getloadavg()
    started = time.monotonic()
    with ControlPlane(progress=ConsoleProgress(console)) as control_plane:
        install_crds(control_plane.api_client(), [CRDS])
        for run in range(1, args.runs + 1):
            for gate in GATES:
                with operator_stage(control_plane, gate, timing) as stage:
                    result = stage.run(control_plane, timing)
                results[gate].append(result)
                console.print(f"run {run}/{args.runs} serve_gate={gate:<8} "
                              f"{result.status_writes:>3} status writes ("
                              f"{result.redundant_status_writes} stored nothing, "
                              f"{result.noise_only_status_writes} only timestamps or nothing), "
                              f"Running after "
                              f"{result.duration:.1f} s")
        version = control_plane.version
    elapsed = time.monotonic() - started

    counts = {gate: [r.status_writes for r in rs] for gate, rs in results.items()}
    stats = {gate: spread([float(c) for c in cs]) for gate, cs in counts.items()}
    ratio = stats["none"]["median"] / max(stats["head-pod"]["median"], 1.0)
    table = Table(title="rayservices/status writes from creation until Running")
    for column in ("serve_gate", "median", "min", "max", "runs", "refused calls (median)",
                   "Running after (median s)", "KubeRay"):
        table.add_column(column, justify="right" if column != "serve_gate" else "left")
    for gate in GATES:
        durations = [r.duration for r in results[gate]]
        refused = statistics.median(r.refused_calls for r in results[gate])
        table.add_row(gate, f"{stats[gate]['median']:g}", f"{stats[gate]['min']:g}",
                      f"{stats[gate]['max']:g}", str(len(counts[gate])), f"{refused:g}",
                      f"{statistics.median(durations):.1f}", str(KUBERAY[gate]))
    console.print(table)
    console.print(f"ratio of medians (none / head-pod): {ratio:.1f}x   (KubeRay: "
                  f"{KUBERAY['none'] / KUBERAY['head-pod']:.1f}x)   total {elapsed:.0f} s")

    report = {
        "benchmark": "RayService status writes until Running, with and without the head-Pod gate",
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "kubernetes_version": version,
        "runs_per_setting": args.runs,
        "interleaved": True,
        "timing": timing.__dict__,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_average_before": load_before,
                    "load_average_after": os.getloadavg()},
        "status_writes": {gate: {**stats[gate], "runs": counts[gate]} for gate in GATES},
        "ratio_of_medians": round(ratio, 2),
        "redundant_status_writes": {
            gate: {"stored_nothing": [r.redundant_status_writes for r in results[gate]],
                   "only_timestamps_or_nothing": [r.noise_only_status_writes
                                                  for r in results[gate]]}
            for gate in GATES},
        "kuberay_seed": KUBERAY,
        "runs": {gate: [{k: v for k, v in r.as_dict().items() if k != "events"}
                        for r in results[gate]] for gate in GATES},
        "elapsed_seconds": round(elapsed, 1),
    }
    save_json(args.out, report)
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
