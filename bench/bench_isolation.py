"""Control planes of a test's own: the hand-over wait with planes started ahead vs cold starts.

An inner pytest session runs ``--tests`` tests marked ``envtest_isolated``, each doing some
work of its own on its fresh cluster (creating ``--objects`` ConfigMaps), once with the
pool of planes started ahead (``--envtest-isolated-pool 1``) and once without (0: every
test pays a cold start), interleaved ``--rounds`` times.  The plugin reports the median
wait per hand-over; the wall time of each session is measured too.  Writes
``bench/results/isolation.json``.
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

from bench.common import RESULTS, save_json


def _tests(count: int, objects: int) -> str:
    body = ["import pytest", ""]
    for index in range(count):
        body += ["@pytest.mark.envtest_isolated",
                 f"def test_isolated_{index}(k8s, namespace):",
                 f"    for n in range({objects}):",
                 "        k8s.core.create_namespaced_config_map(",
                 "            namespace, {'metadata': {'name': f'c{n}'}})",
                 f"    assert len(k8s.core.list_namespaced_config_map(namespace).items) == "
                 f"{objects}", ""]
    return "\n".join(body)


def _session(directory: Path, pool: int) -> tuple[float, float]:
    environment = {**os.environ, "ENVTEST_INSTALLED_ONLY": "1"}
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--rootdir", str(directory), str(directory),
                             f"--envtest-isolated-pool={pool}"],
                            capture_output=True, text=True, env=environment, timeout=1800)
    wall = time.monotonic() - started
    match = re.search(r"handed over, median wait (\d+) ms", result.stdout)
    if result.returncode != 0 or not match:
        raise SystemExit(f"inner session failed:\n{result.stdout[-3000:]}")
    return int(match.group(1)) / 1000, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--objects", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pool", type=int, default=1,
                        help="planes started ahead in the pooled sessions (default 1)")
    args = parser.parse_args()
    waits: dict[int, list[float]] = {args.pool: [], 0: []}
    walls: dict[int, list[float]] = {args.pool: [], 0: []}
    with tempfile.TemporaryDirectory() as workdir:
        directory = Path(workdir)
        (directory / "test_isolated.py").write_text(_tests(args.tests, args.objects))
        for round_ in range(args.rounds):
            for pool in (args.pool, 0):
                wait, wall = _session(directory, pool)
                waits[pool].append(wait)
                walls[pool].append(wall)
                print(f"round {round_ + 1}, pool {pool}: median hand-over {wait * 1000:.0f} ms, "
                      f"session {wall:.1f} s")
    results = {
        "benchmark": "isolated control planes", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "tests": args.tests, "objects_per_test": args.objects, "pool": args.pool,
        "handover_median_seconds_with_pool": statistics.median(waits[args.pool]),
        "handover_median_seconds_cold": statistics.median(waits[0]),
        "session_seconds_with_pool": statistics.median(walls[args.pool]),
        "session_seconds_cold": statistics.median(walls[0]),
    }
    save_json(RESULTS / "isolation.json", results)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
