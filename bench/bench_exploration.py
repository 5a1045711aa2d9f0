"""What exploration costs and finds: the unsafe example's crash point, and the operator suite.

Runs, one after the other (exploration is the measurement; nothing is compared to a run
without it):

- the exploration tests of the example order keepers
  (``tests/framework/test_exploration.py``): each prints how long the unsafe one took to
  find its crash point, from the pytest command to the failing point in the summary;
- ``pytest tests/operator --envtest-explore=KINDS`` (the Ray operator port, every test
  that starts the operator): points run, failing points, the wall time, and each failing
  point's label, grouped by test.

Writes ``bench/results/exploration.json``.

    python -m bench.bench_exploration [--kinds crashes,conflicts] [--limit 20] [--seed 1]
                                      [--workers 2] [--skip-suite]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, save_json

ROOT = Path(__file__).resolve().parent.parent
_FOUND = re.compile(r"crash point found in ([\d.]+) s")
_SUMMARY = re.compile(r"(\d+) test\(s\) explored: (\d+) point\(s\) run, (\d+) failing, "
                      r"([\d.]+) s")
_HEADLINE = re.compile(r"^(\S+::\S+): (explored .*|nothing to explore: .*)$", re.M)
_HEADER = re.compile(r"^_{3,} (\S.*?) _{3,}$")


def pytest(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                            cwd=ROOT, capture_output=True, text=True, timeout=7200,
                            env={**os.environ, "ENVTEST_INSTALLED_ONLY": "1"})
    return result, time.monotonic() - started


def unsafe_example() -> dict[str, Any]:
    result, wall = pytest("tests/framework/test_exploration.py", "-k", "unsafe_operator",
                          "-s", "-q")
    found = _FOUND.search(result.stdout)
    if result.returncode != 0 or found is None:
        raise SystemExit(f"the unsafe example's exploration test failed:\n"
                         f"{result.stdout[-4000:]}")
    return {"found_in_seconds": float(found.group(1)), "test_wall": round(wall, 1)}


def operator_suite(kinds: str, limit: int, seed: int, workers: str) -> dict[str, Any]:
    result, wall = pytest("tests/operator", "-q", "-n", workers, f"--envtest-explore={kinds}",
                          f"--envtest-explore-limit={limit}", f"--envtest-explore-seed={seed}")
    summary = _SUMMARY.search(result.stdout)
    if summary is None:
        raise SystemExit(f"no exploration summary (exit {result.returncode}):\n"
                         f"{result.stdout[-4000:]}")
    tests = {nodeid: headline for nodeid, headline in _HEADLINE.findall(result.stdout)}
    failing: dict[str, list[str]] = {}
    name = ""
    for line in result.stdout.splitlines():  # "____ test_x[p] ____" heads each failure
        header = _HEADER.match(line)
        if header:
            name = header.group(1)
        elif line.startswith("FAILING ") and name:
            failing.setdefault(name, []).append(line[len("FAILING "):])
    return {"kinds": kinds, "limit": limit, "seed": seed, "workers": workers,
            "tests_explored": int(summary.group(1)), "points": int(summary.group(2)),
            "failing_points": int(summary.group(3)),
            "points_seconds": float(summary.group(4)), "wall": round(wall, 1),
            "tests": tests, "failing": failing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="crashes,conflicts")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", default="2")
    parser.add_argument("--skip-suite", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"unsafe_example": unsafe_example()}
    print(f"unsafe example: crash point found in "
          f"{results['unsafe_example']['found_in_seconds']} s")
    if not args.skip_suite:
        suite = operator_suite(args.kinds, args.limit, args.seed, args.workers)
        results["operator_suite"] = suite
        print(f"operator suite: {suite['tests_explored']} tests, {suite['points']} points, "
              f"{suite['failing_points']} failing, {suite['wall']} s wall")
        for name, labels in suite["failing"].items():
            print(f"  {name}: {'; '.join(labels)}")
    save_json(RESULTS / "exploration.json", results)


if __name__ == "__main__":
    main()
