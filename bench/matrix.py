"""`make matrix`: the operator suite on each Kubernetes minor, as a table and a JSON file.

With no versions named, every minor from 1.29 installed here (its newest patch)
is run; name versions (``python -m bench.matrix 1.35 1.37``) to choose, which
obtains them first (built and cached on first use).  Each version runs in a
fresh pytest process with a JUnit report, so the counts are pytest's own;
``bench/results/matrix.json`` gets one row per version (version, patch,
passed, failed, skipped, seconds).  ``--one-run`` also runs the same versions
in one pytest session (``--envtest-k8s-version a,b,c``) and records both wall
times, for the comparison.
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
from envtest import OLDEST_BUILDABLE_MINOR, ConsoleProgress
from envtest.binaries import BinaryStore, Resolver, default_store_root

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SUITE = ["tests/operator"]


def installed_minors() -> list[str]:
    """The minors (1.29 on) with an installed entry holding kube-apiserver and etcd."""
    bin_dir = os.environ.get("ENVTEST_BIN_DIR")
    store = BinaryStore(Path(bin_dir) if bin_dir else default_store_root())
    minors = {entry.version.minor for entry in store.installed()
              if entry.version.minor >= OLDEST_BUILDABLE_MINOR
              and {"kube-apiserver", "etcd"} <= set(entry.components)}
    return [f"1.{minor}" for minor in sorted(minors)]


def junit_counts(report: Path) -> dict[str, int]:
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if report.exists():
        node = ET.parse(report).getroot()
        node = node if node.tag == "testsuite" else node[0]
        for key in counts:
            counts[key] = int(node.get(key, 0))
    return counts


def run_version(spec: str, suite: list[str], extra: list[str]) -> dict[str, object]:
    version = Resolver(spec, progress=ConsoleProgress()).resolve().binaries.version
    report = RESULTS / f"matrix-{version}.xml"
    started = time.monotonic()
    process = subprocess.run(
        [sys.executable, "-m", "pytest", *suite, "-q", "-p", "no:cacheprovider",
         f"--junitxml={report}", *extra],
        cwd=ROOT, env={**os.environ, "ENVTEST_K8S_VERSION": str(version)})
    wall = time.monotonic() - started
    counts = junit_counts(report)
    failed = counts["failures"] + counts["errors"]
    return {"version": version.minor_str if version else spec, "patch": str(version),
            "passed": counts["tests"] - failed - counts["skipped"], "failed": failed,
            "skipped": counts["skipped"], "seconds": round(wall, 1),
            "exit_code": process.returncode}


def run_together(specs: list[str], suite: list[str], extra: list[str]) -> dict[str, object]:
    """The same versions in one pytest session: the plugin's matrix."""
    report = RESULTS / "matrix-one-run.xml"
    started = time.monotonic()
    process = subprocess.run(
        [sys.executable, "-m", "pytest", *suite, "-q", "-p", "no:cacheprovider",
         f"--envtest-k8s-version={','.join(specs)}", f"--junitxml={report}", *extra],
        cwd=ROOT, env=dict(os.environ))
    counts = junit_counts(report)
    return {"versions": specs, "tests": counts["tests"],
            "failed": counts["failures"] + counts["errors"],
            "seconds": round(time.monotonic() - started, 1), "exit_code": process.returncode}


def main(argv: list[str]) -> int:
    one_run = "--one-run" in argv
    specs = [a for a in argv if not a.startswith("-")] or installed_minors()
    extra = [a for a in argv if a.startswith("-") and a != "--one-run"]
    if not specs:
        print("no Kubernetes minor from 1.29 is installed: 'envtest use 1.37' gets one, or name "
              "versions (python -m bench.matrix 1.36 1.37)", file=sys.stderr)
        return 2
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows = [run_version(spec, DEFAULT_SUITE, extra) for spec in specs]
    table = Table(title="operator suite per Kubernetes version")
    for column in ("version", "patch", "passed", "failed", "skipped", "seconds"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(row[key]) for key in ("version", "patch", "passed", "failed",
                                                   "skipped", "seconds")))
    Console().print(table)
    save_json(RESULTS / "matrix.json", rows)
    codes = [r["exit_code"] for r in rows]
    if one_run:
        together = run_together(specs, DEFAULT_SUITE, extra)
        separate = round(sum(float(str(r["seconds"])) for r in rows), 1)
        Console().print(f"one run of {len(specs)} versions: {together['seconds']} s; "
                        f"{len(specs)} separate runs: {separate} s")
        save_json(RESULTS / "matrix-one-run.json", {**together, "separate_seconds": separate})
        codes.append(together["exit_code"])
    return 0 if all(code == 0 for code in codes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
