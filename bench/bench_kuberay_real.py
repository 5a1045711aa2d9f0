"""The seed on the real KubeRay: ray-operator v0.5.0 (before the change) and v0.6.0 (after).

Builds both releases once from their Go modules, unchanged (``known_bugs.build``: cached
like the binaries), then runs ``kuberay_real/scenario_kuberay.py`` (an ordinary pytest file:
``run_operator``, ``pod_simulator``, ``services`` for the Dashboard, ``api_calls``) in a
folder of its own, each run going through every head-Pod delay and version in turn, so
drift on the machine hits all alike.  Nothing touches ``/etc/hosts``: the operator's calls
to ``<cluster>-head-svc.<ns>.svc.cluster.local`` reach the fake Dashboard through the
``services`` fixture's proxy.  Writes ``bench/results/kuberay-real.json``: a row per version
and delay, each figure the median of the runs, with every run's figures beside them; and
the timeline report of the last run of each version at the longest delay, drawn with the
timestamp-only writes as redundant (``--envtest-report-noise=*Time``).

    python -m bench.bench_kuberay_real [--runs 3] [--delays 3,30] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, save_json
from bench.known_bugs.build import BuildUnavailable, Built, build

MODULE = "github.com/ray-project/kuberay/ray-operator"
VERSIONS = ("v0.5.0", "v0.6.0")
SCENARIO = Path(__file__).resolve().parent / "kuberay_real" / "scenario_kuberay.py"
OUTPUT = RESULTS / "kuberay-real.json"
#: The figures each row gives as the median of its runs.
FIGURES = ("status_writes", "timestamp_only_writes", "stored_nothing", "dashboard_calls",
           "dashboard_refused", "calls_before_head_ready", "seconds_to_promotion")


def builds(say: Any = print) -> dict[str, Built]:
    """Both releases, built (or found built); :class:`BuildUnavailable` says why not."""
    found = {}
    for version in VERSIONS:
        started = time.monotonic()
        found[version] = build(MODULE, version)
        say(f"ray-operator {version}: {found[version].binary} "
            f"({time.monotonic() - started:.0f} s)")
    return found


def run_scenario(built: dict[str, Built], runs: int, delays: list[float],
                 reports: Path | None = None, say: Any = print) -> list[dict[str, Any]]:
    """Every run's row, from one pytest session of the scenario."""
    with tempfile.TemporaryDirectory(prefix="kuberay-real-") as folder:
        shutil.copy(SCENARIO, folder)  # run where no conftest or ini of this repository is
        results = Path(folder) / "rows.jsonl"
        env = {**os.environ,
               "KUBERAY_BUILDS": json.dumps({v: {"binary": str(b.binary),
                                                 "source": str(b.source)}
                                             for v, b in built.items()}),
               "KUBERAY_DELAYS": ",".join(f"{d:g}" for d in delays),
               "KUBERAY_RUNS": str(runs), "KUBERAY_RESULTS": str(results)}
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v",
                   SCENARIO.name, f"--basetemp={folder}/tmp", "--envtest-report-noise=*Time",
                   "-W", "ignore:.*nothing serves"]
        if reports is not None:
            command.append(f"--envtest-report={folder}/reports")
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder,
                              check=False, timeout=3600)
        for line in done.stdout.splitlines():
            if "::test_rayservice_comes_up[" in line:
                say(line.split("::", 1)[1])
        if done.returncode != 0:
            raise RuntimeError(f"the scenario failed (exit {done.returncode}):\n"
                               f"{done.stdout[-4000:]}{done.stderr[-2000:]}")
        if reports is not None:
            reports.mkdir(parents=True, exist_ok=True)
            longest = f"{max(delays):g}s"
            for html in sorted(Path(folder, "reports").glob(f"*run{runs}-*-{longest}_.html")):
                version = next(v for v in VERSIONS if v in html.name)
                shutil.copy(html, reports / f"kuberay-real-{version}-{longest}.html")
        return [json.loads(line) for line in results.read_text().splitlines() if line]


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per version and delay: the median of each figure over its runs."""
    table = []
    for delay in sorted({r["head_delay_s"] for r in rows}):
        for version in VERSIONS:
            mine = [r for r in rows if r["version"] == version and r["head_delay_s"] == delay]
            if not mine:
                continue
            row: dict[str, Any] = {"version": version, "head_delay_s": delay}
            for figure in FIGURES:
                row[figure] = statistics.median(r[figure] for r in mine)
            row["runs"] = {figure: [r[figure] for r in mine] for figure in FIGURES}
            row["paths"] = sorted({p for r in mine for p in r["paths"]})
            table.append(row)
    return table


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
