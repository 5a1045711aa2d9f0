"""The seed on the real KubeRay: ray-operator v0.5.0 (before the change) and v0.6.0 (after).

Builds both releases once from their Go modules, unchanged (``tests/support/go_modules``:
cached like the binaries), then runs ``tests/support/kuberay_real/scenario_kuberay.py`` (an
ordinary pytest file: ``run_operator``, ``pod_simulator``, ``services`` for the Dashboard,
``api_calls``) in a folder of its own, each run going through every head-Pod delay and
version in turn, so drift on the machine hits all alike. Nothing touches ``/etc/hosts``: the
operator's calls to ``<cluster>-head-svc.<ns>.svc.cluster.local`` reach the fake Dashboard
through the ``services`` fixture's proxy. Writes ``bench/results/kuberay-real.json``: a row
per version and delay, each figure the median of the runs, with every run's figures beside
them; and the timeline report of the last run of each version at the longest delay, drawn
with the timestamp-only writes as redundant (``--envtest-report-noise=*Time``).

    python -m bench.bench_kuberay_real [--runs 3] [--delays 3,30] [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

from bench.common import RESULTS, save_json
from tests.support.go_modules import BuildUnavailable
from tests.support.kuberay_real import builds, medians, run_scenario

OUTPUT = RESULTS / "kuberay-real.json"

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per version and delay")
    parser.add_argument("--delays", default="3,30", help="head Pod delays, seconds")
    parser.add_argument("--quick", action="store_true",
                        help="one run at a 3 s delay (make demo), results not saved")
    parser.add_argument("--out", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    runs, delays = (1, [3.0]) if args.quick else (
        args.runs, [float(d) for d in args.delays.split(",")])
    try:
        built = builds()
    except BuildUnavailable as why:
        print(f"the real KubeRay cannot be built here: {why}")
        return 0 if args.quick else 1
    started = time.monotonic()
    rows = run_scenario(built, runs, delays, reports=RESULTS)
    table = medians(rows)
    for row in table:
        print(f"{row['version']} head Ready after {row['head_delay_s']:g} s: "
              f"{row['status_writes']:g} status writes ({row['timestamp_only_writes']:g} only "
              f"timestamps), {row['dashboard_calls']:g} Dashboard calls "
              f"({row['dashboard_refused']:g} refused, {row['calls_before_head_ready']:g} "
              f"before the head Pod was Ready), promoted after "
              f"{row['seconds_to_promotion']:g} s")
    if not args.quick:
        save_json(args.out, {
            "rows": [{k: v for k, v in row.items() if k not in ("runs", "paths")}
                     for row in table],
            "runs": rows, "per_row": table, "minutes": round((time.monotonic() - started)
                                                             / 60, 1),
            "go": subprocess.run(["go", "version"], capture_output=True, text=True,
                                 check=False, env={**os.environ, "PATH": os.environ.get(
                                     "PATH", "") + ":/usr/local/go/bin"}).stdout.strip()})
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
