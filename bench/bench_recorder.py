"""The recorder's cost: the operator suite with every test's namespace recorded, and without.

Runs ``pytest tests/operator`` (``-n auto``, as ``make test`` does) alternately with
``--envtest-record=off`` and ``--envtest-record=namespace`` (a watch on every resource of
each test's namespaces, all changes kept with field-level diffs), ``--rounds`` times, and
reports the median wall time of each and their ratio.  Interleaved, so that the machine's
drift hits both alike.  Writes ``bench/results/recorder.json``.

    python -m bench.bench_recorder [--rounds 3] [--suite tests/operator]
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

from bench.common import RESULTS, save_json, spread

ROOT = Path(__file__).resolve().parent.parent
MODES = ("off", "namespace")


def run(suite: str, mode: str, workers: str) -> float:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", suite, "-q", "-p", "no:cacheprovider", "-n", workers,
         f"--envtest-record={mode}"],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
        env={**os.environ, "ENVTEST_INSTALLED_ONLY": "1"})
    wall = time.monotonic() - started
    if result.returncode != 0:  # exit code 5 (no tests) included: a figure of nothing
        raise SystemExit(f"pytest {suite} --envtest-record={mode} exited "
                         f"{result.returncode}:\n{result.stdout[-3000:]}")
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--suite", default="tests/operator")
    parser.add_argument("-n", dest="workers", default="auto")
    args = parser.parse_args(argv)
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    for round_ in range(args.rounds):
        order = MODES if round_ % 2 == 0 else tuple(reversed(MODES))
        for mode in order:
            wall = run(args.suite, mode, args.workers)
            walls[mode].append(wall)
            print(f"round {round_ + 1}: --envtest-record={mode}: {wall:.1f} s", flush=True)
    medians = {mode: statistics.median(values) for mode, values in walls.items()}
    results = {
        "benchmark": "recorder overhead on the operator suite",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "suite": args.suite, "workers": args.workers, "rounds": args.rounds,
        "wall_seconds": {mode: [round(w, 1) for w in values] for mode, values in walls.items()},
        "spread": {mode: spread(values) for mode, values in walls.items()},
        "median_seconds": {mode: round(value, 1) for mode, value in medians.items()},
        "ratio_recorded_to_off": round(medians["namespace"] / medians["off"], 3),
    }
    save_json(RESULTS / "recorder.json", results)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
