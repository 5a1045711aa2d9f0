"""The fault proxy's cost when it injects nothing: the operator suite and the 200-RayService load
with every operator behind its proxy, and without.

Runs, interleaved (``--rounds`` times each, the order flipped every round so the machine's drift
hits both alike):

- ``pytest tests/operator -n auto`` with ``ENVTEST_OPERATOR_PROXY=always`` (``run_operator``'s
  operators reach the apiserver through their proxies: the default; "on" below) and
  ``=faults`` (only tests using ``faults``, none there: "off"); the suite must pass both
  ways, and its status-write test prints the counts (with the gate and without), kept here
  for each run;
- ``python -m bench.bench_load --services N`` with ``--proxy`` and without: the time until
  every RayService is Running, and the operator's requests per second.

Reports the medians and their ratios; writes ``bench/results/fault-proxy.json``.

    python -m bench.bench_fault_proxy [--rounds 2] [--services 200] [--skip-suite] [--skip-load]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, save_json, spread

ROOT = Path(__file__).resolve().parent.parent
_COUNTS = re.compile(r"with the gate (\d+), without it (\d+)")


def run_suite(suite: str, proxy: str, workers: str) -> dict[str, Any]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", suite, "-q", "-p", "no:cacheprovider", "-n", workers,
         "-rA"],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
        env={**os.environ, "ENVTEST_INSTALLED_ONLY": "1",
             "ENVTEST_OPERATOR_PROXY": "always" if proxy == "on" else "faults"})
    wall = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"pytest {suite} with the proxy {proxy} exited "
                         f"{result.returncode}:\n{result.stdout[-4000:]}")
    counts = _COUNTS.search(result.stdout)
    passed = re.search(r"(\d+) passed", result.stdout)
    return {"wall": round(wall, 1), "passed": int(passed.group(1)) if passed else None,
            "status_writes": {"gate": int(counts.group(1)), "none": int(counts.group(2))}
            if counts else None}


def run_load(services: int, proxy: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "load.json"
        command = [sys.executable, "-m", "bench.bench_load", "--services", str(services),
                   "--out", str(out)] + (["--proxy"] if proxy else [])
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                timeout=3600, env={**os.environ, "ENVTEST_INSTALLED_ONLY": "1"})
        if result.returncode != 0 or not out.exists():
            raise SystemExit(f"{' '.join(command)} exited {result.returncode}:\n"
                             f"{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
        figures = json.loads(out.read_text())
    return {"converge_seconds": figures["converge_seconds"],
            "all_running": figures["correctness"]["all_running"],
            "operator_writes": sum((figures.get("operator_writes") or {}).values()),
            "status_writes": (figures.get("operator_status_writes") or {}).get(
                "rayservices/status")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--suite", default="tests/operator")
    parser.add_argument("-n", dest="workers", default="auto")
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--skip-suite", action="store_true")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "fault-proxy.json")
    args = parser.parse_args(argv)
    suite: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    load: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for round_ in range(args.rounds):
        order = ("off", "on") if round_ % 2 == 0 else ("on", "off")
        for mode in order:
            if not args.skip_suite:
                figures = run_suite(args.suite, mode, args.workers)
                suite[mode].append(figures)
                print(f"round {round_ + 1}: suite, proxy {mode}: {figures}", flush=True)
        for mode in order:
            if not args.skip_load:
                figures = run_load(args.services, mode == "on")
                load[mode].append(figures)
                print(f"round {round_ + 1}: load, proxy {mode}: {figures}", flush=True)

    def summary(runs: dict[str, list[dict[str, Any]]], key: str) -> dict[str, Any]:
        values = {mode: [r[key] for r in series if r[key] is not None]
                  for mode, series in runs.items()}
        if not all(values.values()):
            return {}
        medians = {mode: statistics.median(v) for mode, v in values.items()}
        return {"values": values, "spread": {m: spread(v) for m, v in values.items()},
                "median": {m: round(v, 2) for m, v in medians.items()},
                "ratio_on_to_off": round(medians["on"] / medians["off"], 3)}

    results = {
        "benchmark": "fault proxy overhead, no fault set (operator suite; 200-RayService load)",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "rounds": args.rounds, "suite": args.suite, "workers": args.workers,
        "services": args.services,
        "suite_runs": suite, "suite_wall_seconds": summary(suite, "wall") if suite["on"] else {},
        "load_runs": load,
        "load_converge_seconds": summary(load, "converge_seconds") if load["on"] else {},
    }
    save_json(args.out, results)
    print(json.dumps({k: v for k, v in results.items() if not k.endswith("_runs")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
