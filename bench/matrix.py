"""`make matrix`: the operator suite on every supported Kubernetes minor, as a table.

Each version's binaries are obtained once (built and cached on first use);
the suite runs in a fresh pytest process per version with a JUnit report, so
the counts are pytest's own.  Results go to bench/results/matrix.json too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.common import RESULTS, save_json
from envtest import ConsoleProgress
from envtest.binaries import Resolver

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SUITE = ["tests/operator"]


def run_version(spec: str, suite: list[str], extra: list[str]) -> dict[str, object]:
    version = Resolver(spec, progress=ConsoleProgress()).resolve().binaries.version
    report = RESULTS / f"matrix-{version}.xml"
    started = time.monotonic()
    process = subprocess.run(
        [sys.executable, "-m", "pytest", *suite, "-q", "-p", "no:cacheprovider",
         f"--junitxml={report}", *extra],
        cwd=ROOT, env={**os.environ, "ENVTEST_K8S_VERSION": str(version)})
    wall = time.monotonic() - started
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if report.exists():
        suite_node = ET.parse(report).getroot()
        suite_node = suite_node if suite_node.tag == "testsuite" else suite_node[0]
        for key in counts:
            counts[key] = int(suite_node.get(key, 0))
    failed = counts["failures"] + counts["errors"]
    return {"version": str(version), "passed": counts["tests"] - failed - counts["skipped"],
            "failed": failed, "skipped": counts["skipped"], "exit_code": process.returncode,
            "wall_seconds": round(wall, 1)}


def main(argv: list[str]) -> int:
    specs = [a for a in argv if not a.startswith("-")] or ["1.34", "1.35", "1.36", "1.37"]
    extra = [a for a in argv if a.startswith("-")]
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows = [run_version(spec, DEFAULT_SUITE, extra) for spec in specs]
    table = Table(title="operator suite per Kubernetes version")
    for column in ("version", "passed", "failed", "skipped", "wall time"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(str(row["version"]), str(row["passed"]), str(row["failed"]),
                      str(row["skipped"]), f"{row['wall_seconds']} s")
    Console().print(table)
    save_json(RESULTS / "matrix.json", rows)
    return 0 if all(r["exit_code"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
