"""`make bench`: every benchmark in turn, each writing its figures to bench/results/."""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS = [
    ["bench.bench_controlplane", "--runs", "7"],
    ["bench.bench_fixtures", "--runs", "30", "--suite"],
    ["bench.bench_status_writes"],
    ["bench.bench_load", "--services", "200"],
    ["bench.bench_binaries"],
    ["bench.bench_crds"],
    ["bench.bench_isolation"],
]


def main() -> int:
    failed = []
    for module, *args in BENCHMARKS:
        print(f"\n=== {module} {' '.join(args)}", flush=True)
        if subprocess.run([sys.executable, "-m", module, *args]).returncode != 0:
            failed.append(module)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
