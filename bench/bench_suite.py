"""Where ``make test``'s time goes: seconds per kind of test, and CPU per kind of process.

Runs the suite as ``make test`` does (``python -m pytest -n WORKERS``, the binaries
installed), with ``bench.suite_items`` recording each test's seconds and what it does
(``suite_items.GROUPS``), while a sampler reads every process under the run once a second
and sums their CPU by kind (kube-apiserver, etcd, the other Kubernetes binaries, Python,
the rest).  A process that lives less than a second between two samples is missed by the
per-kind sums; the total is the kernel's own count of the children's CPU (``getrusage``).

The suite is CPU-bound on two cores: the CPU each kind of process burns is what a change
must take away to shorten it, so both tables are printed and written to
``bench/results/suite.json`` (or ``--out``).

    python -m bench.bench_suite [--workers 2] [--out FILE] [-- PYTEST ARGS...]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil

from bench.common import RESULTS, save_json
from bench.suite_items import GROUPS

ROOT = Path(__file__).resolve().parent.parent
#: pytest's last line: ``712 passed, 3 skipped in 557.66s (0:09:17)`` (``-q``; between
#: ``=`` signs without it).
_SUMMARY = re.compile(r"^=*\s*(\d+ (?:passed|failed)[^\n]*?) in ([\d.]+)s\b", re.MULTILINE)
KINDS = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "python",
         "chromium", "kubectl", "go")


def kind_of(process: psutil.Process) -> str:
    try:
        name = process.name()
    except psutil.Error:
        return "gone"
    for kind in KINDS:
        if name.startswith(kind):
            return kind
    return "other"


#: What a Python process under the run is, by its command line, first match wins.
PYTHON_ROLES = (
    ("xdist workers (the tests themselves)", ("execnet", "import sys;exec(eval(")),
    ("inner pytest sessions", ("-mpytest", "-m pytest", "pytest ")),
    ("envtest CLI", ("envtest ", "/envtest", "envtest.cli")),
)


def python_role(process: psutil.Process) -> str:
    """Which Python process this is (an xdist worker, an inner session, the CLI, the rest:
    operators run as commands, example scripts, helpers)."""
    try:
        command = " ".join(process.cmdline())
    except psutil.Error:
        return "gone"
    for role, marks in PYTHON_ROLES:
        if any(mark in command for mark in marks):
            return role
    return "other Python (operators as commands, example scripts, helpers)"


#: How often the processes are read: what a process spends after its last read is not seen.
SAMPLE_SECONDS = 0.5


class CpuSampler(threading.Thread):
    """The CPU seconds of every process under ``root``, by kind, sampled twice a second."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.stop = threading.Event()
        self.last: dict[tuple[int, float], tuple[str, float]] = {}
        self.roles: dict[tuple[int, float], str] = {}
        #: Each process's child of ``root`` (an xdist worker), or None (root itself).
        self.worker_of: dict[tuple[int, float], int | None] = {}
        #: (time, CPU seconds since the sample before) per worker pid: what its tests cost.
        self.worker_samples: defaultdict[int, list[tuple[float, float]]] = defaultdict(list)

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_SECONDS):
            try:
                processes = psutil.Process(self.root).children(recursive=True)
            except psutil.Error:
                continue
            now = time.time()
            spent: defaultdict[int, float] = defaultdict(float)
            for process in processes:
                try:
                    with process.oneshot():
                        times = process.cpu_times()
                        key = (process.pid, process.create_time())
                        kind = kind_of(process)
                        if kind == "python" and key not in self.roles:
                            self.roles[key] = python_role(process)
                        if key not in self.worker_of:
                            self.worker_of[key] = self._worker_of(process)
                except psutil.Error:
                    continue
                cpu = times.user + times.system
                worker = self.worker_of[key]
                if worker is not None:
                    spent[worker] += cpu - self.last.get(key, (kind, 0.0))[1]
                self.last[key] = (kind, cpu)
            for worker, seconds in spent.items():
                self.worker_samples[worker].append((now, seconds))

    def _worker_of(self, process: psutil.Process) -> int | None:
        for ancestor in [process, *process.parents()]:
            if ancestor.ppid() == self.root:
                return ancestor.pid
        return None

    def cpu_of_tests(self, tests: dict[str, dict[str, Any]]) -> dict[str, float]:
        """The CPU seconds of each test: of its worker and everything under it while it ran
        (each sample goes to the test running at its middle; a test shorter than the
        interval may get none, or another's; a process's last half second is not seen)."""
        starts_of: defaultdict[int, list[tuple[float, str]]] = defaultdict(list)
        for nodeid, entry in tests.items():
            if {"pid", "start"} <= entry.keys():
                starts_of[entry["pid"]].append((entry["start"], nodeid))
        cpu: defaultdict[str, float] = defaultdict(float)
        for worker, samples in self.worker_samples.items():
            ordered = sorted(starts_of.get(worker, []))
            starts = [start for start, _ in ordered]
            for at, seconds in samples:
                index = bisect.bisect_right(starts, at - SAMPLE_SECONDS / 2) - 1
                if index >= 0:
                    cpu[ordered[index][1]] += seconds
        return dict(cpu)

    def by_kind(self) -> dict[str, dict[str, float]]:
        return _table(self.last.values())

    def python_by_role(self) -> dict[str, dict[str, float]]:
        """The Python processes' CPU by what they are (:data:`PYTHON_ROLES`)."""
        return _table((role, self.last[key][1]) for key, role in self.roles.items()
                      if key in self.last)


def _table(processes: Iterable[tuple[str, float]]) -> dict[str, dict[str, float]]:
    """CPU seconds and processes by name, from (name, CPU seconds) a process, most first."""
    seconds: defaultdict[str, float] = defaultdict(float)
    counts: defaultdict[str, int] = defaultdict(int)
    for name, cpu in processes:
        seconds[name] += cpu
        counts[name] += 1
    return {name: {"cpu_seconds": round(value, 1), "processes": counts[name]}
            for name, value in sorted(seconds.items(), key=lambda kv: -kv[1])}


def _workers(tests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """When each worker ran out of tests, and the tests that ran last: a worker done long
    before the others is a core idle at the end (a long test started late)."""
    timed = {name: e for name, e in tests.items() if "start" in e and "stop" in e}
    if not timed:
        return {"workers": {}, "last_to_finish": []}
    origin = min(e["start"] for e in timed.values())
    workers: dict[str, dict[str, Any]] = {}
    for entry in timed.values():
        figures = workers.setdefault(entry.get("worker", "main"),
                                     {"tests": 0, "busy_seconds": 0.0, "done_at": 0.0})
        figures["tests"] += 1
        figures["busy_seconds"] += entry["seconds"]
        figures["done_at"] = max(figures["done_at"], entry["stop"] - origin)
    for figures in workers.values():
        figures["busy_seconds"] = round(figures["busy_seconds"], 1)
        figures["done_at"] = round(figures["done_at"], 1)
    last = sorted(timed.items(), key=lambda kv: -kv[1]["stop"])[:10]
    return {"workers": dict(sorted(workers.items())),
            "last_to_finish": [{"test": name, "worker": e.get("worker", "main"),
                                "from": round(e["start"] - origin, 1),
                                "to": round(e["stop"] - origin, 1)} for name, e in last]}


def durations(tests: dict[str, dict[str, Any]], floor: float = 1.0) -> dict[str, float]:
    """Each test's seconds, of those that took ``floor`` or more (the rest count as short)."""
    return {nodeid: round(entry["seconds"], 1) for nodeid, entry in sorted(tests.items())
            if entry["seconds"] >= floor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="2")
    parser.add_argument("--out", type=Path, default=RESULTS / "suite.json")
    parser.add_argument("--gogc", default=os.environ.get("SUITE_GOGC", "400"),
                        help="GOGC of the suite's Go processes (make test's SUITE_GOGC)")
    parser.add_argument("--durations-out", type=Path, default=None,
                        help="also write each test's seconds (those of a second or more) here: "
                             "tests/durations.json is what make test orders its tests by")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        items_file = Path(folder) / "items.json"
        command = [sys.executable, "-m", "pytest", "-n", args.workers, "-p", "bench.suite_items",
                   f"--suite-items={items_file}", "-q", *args.pytest_args]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        # As the Makefile does: bytecode cached, whatever the environment says, and the
        # planes' GOGC (SUITE_GOGC) unless --gogc says otherwise.
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        environment["GOGC"] = args.gogc
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, env=environment,
                                   stderr=subprocess.STDOUT, text=True)
        sampler = CpuSampler(process.pid)
        sampler.start()
        output, _ = process.communicate()
        wall = time.monotonic() - started
        sampler.stop.set()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        tests = json.loads(items_file.read_text()) if items_file.exists() else {}
    summary = _SUMMARY.findall(output)
    if not tests or not summary:
        raise SystemExit(f"the suite did not finish (exit {process.returncode}):\n"
                         f"{output[-4000:]}")
    groups: dict[str, dict[str, Any]] = {g: {"tests": 0, "seconds": 0.0} for g in GROUPS}
    for entry in tests.values():
        group = groups[entry.get("group", GROUPS[-1])]
        group["tests"] += 1
        group["seconds"] += entry["seconds"]
    for group in groups.values():
        group["seconds"] = round(group["seconds"], 1)
    workers = _workers(tests)
    cpu_total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    slowest = sorted(tests.items(), key=lambda kv: -kv[1]["seconds"])[:40]
    cpu_of_tests = sampler.cpu_of_tests(tests)
    results = {
        "command": " ".join(command[1:]), "gogc": args.gogc, "exit": process.returncode,
        "outcome": summary[-1][0], "suite_seconds": float(summary[-1][1]),
        "wall": round(wall, 1), "cpu_seconds": round(cpu_total, 1),
        "cores": psutil.cpu_count(), "groups": groups, "cpu_by_process": sampler.by_kind(),
        "python_by_role": sampler.python_by_role(),
        "test_seconds": round(sum(e["seconds"] for e in tests.values()), 1),
        "workers": workers["workers"], "last_to_finish": workers["last_to_finish"],
        "failed": sorted(n for n, e in tests.items() if e["outcome"] == "failed"),
        "slowest": [{"test": nodeid, "seconds": round(e["seconds"], 1),
                     "group": e.get("group", "")} for nodeid, e in slowest],
        "most_cpu": [{"test": nodeid, "cpu_seconds": round(seconds, 1),
                      "seconds": round(tests[nodeid]["seconds"], 1)}
                     for nodeid, seconds in sorted(cpu_of_tests.items(),
                                                   key=lambda kv: -kv[1])[:40]],
        "cpu_by_group": {group: round(sum(seconds for nodeid, seconds in cpu_of_tests.items()
                                          if tests[nodeid].get("group") == group), 1)
                         for group in groups},
    }
    print(f"{results['outcome']} in {results['suite_seconds']} s (wall {results['wall']} s, "
          f"{results['cpu_seconds']} CPU s on {results['cores']} cores; the tests' own "
          f"seconds add up to {results['test_seconds']})")
    for name, group in sorted(groups.items(), key=lambda kv: -kv[1]["seconds"]):
        print(f"  {group['seconds']:7.1f} s  {group['tests']:4d} tests  {name}")
    for prefix, table in (("", results["cpu_by_process"]),
                          ("python: ", results["python_by_role"])):
        for name, figures in table.items():
            print(f"  {figures['cpu_seconds']:7.1f} CPU s  {figures['processes']:4d} "
                  f"processes  {prefix}{name}")
    for worker, figures in results["workers"].items():
        print(f"  {worker}: {figures['tests']} tests, busy {figures['busy_seconds']} s, "
              f"done at {figures['done_at']} s")
    print("  the last to finish:")
    for entry in results["last_to_finish"]:
        print(f"    {entry['from']:6.1f} -> {entry['to']:6.1f} s  {entry['worker']}  "
              f"{entry['test']}")
    print("  the most CPU (the test, its worker and everything they started):")
    for entry in results["most_cpu"][:15]:
        print(f"    {entry['cpu_seconds']:6.1f} CPU s in {entry['seconds']:6.1f} s  "
              f"{entry['test']}")
    save_json(args.out, results)
    args.out.with_suffix(".log").write_text(output)
    if args.durations_out and process.returncode == 0:
        save_json(args.durations_out, durations(tests))
    if process.returncode != 0:
        raise SystemExit(f"the suite failed (exit {process.returncode}): "
                         f"{', '.join(results['failed'])}; its output: "
                         f"{args.out.with_suffix('.log')}")


if __name__ == "__main__":
    main()
