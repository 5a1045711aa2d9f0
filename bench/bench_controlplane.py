"""Control-plane start/stop: pytest-envtest's ControlPlane next to controller-runtime's envtest.

Run from the repository root::

    .venv/bin/python -m bench.bench_controlplane [--runs N] [--k8s-version 1.37]

Both sides use the same etcd and kube-apiserver binaries (the cached default
version, as ``envtest use <v> -p path`` prints it).  Runs are interleaved
(ours, Go's, ours, Go's, ...) so both share the machine's noise, and every run
is a fresh process on both sides: a ``python -m bench.bench_controlplane
--child`` for ours, ``bench/go-envtest/bin/go-envtest -runs 1`` for Go's.
Start is timed inside each process from "nothing running" to "ready"
(ours: construct ``ControlPlane(version)`` and ``start()``, which includes
resolving the binaries from the cache; Go: ``env.Start()``), so interpreter and
Go runtime start-up are excluded on both sides.  Resident memory is the RSS of
etcd + kube-apiserver right after ready, and their anonymous memory (RSS without
the binaries' file pages, shared by every plane: what one more plane costs; ours
only: Go's envtest stops before it can be sampled).

What a test waits for inside pytest is measured in the same rounds
(``session_planes``): the session's first plane, and a plane of a test's own
handed over by the pool started ahead, each as a ratio to Go envtest's start.

These are figures, not a pass/fail test; the table is printed and the JSON is
written to ``bench/results/controlplane.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_footprint import anonymous_mib
from bench.session_planes import run_session

ROOT = Path(__file__).resolve().parent.parent
GO_DIR = ROOT / "bench" / "go-envtest"
GO_BINARY = GO_DIR / "bin" / "go-envtest"
RESULTS = ROOT / "bench" / "results" / "controlplane.json"
BIN_DIR = Path(sys.executable).parent
RUN_TIMEOUT = 180.0
START_TARGET_RATIO = 0.8
STOP_TARGET_SECONDS = 1.0


# -- one run of ours, in a fresh process ---------------------------------------------------


def child(version: str, readiness: str) -> int:
    """Start, measure and stop one ControlPlane; print one JSON line."""
    import psutil

    from envtest import ControlPlane

    started = time.perf_counter()
    control_plane = ControlPlane(version, readiness=readiness)
    try:
        control_plane.binaries  # noqa: B018 - resolving from the cache, timed on its own
        resolved = time.perf_counter()
        control_plane.prepare()  # private dirs and PKI
        prepared = time.perf_counter()
        control_plane.start()  # etcd + kube-apiserver up, /readyz, default namespace
        ready = time.perf_counter()
        start_seconds = ready - started
        rss = {name: psutil.Process(pid).memory_info().rss
               for name, pid in control_plane.pids.items()}
        anonymous = {name: anonymous_mib(pid) for name, pid in control_plane.pids.items()}
        own_rss = psutil.Process().memory_info().rss
    finally:
        stopping = time.perf_counter()
        control_plane.stop()
        stop_seconds = time.perf_counter() - stopping
    print(json.dumps({
        "start_seconds": start_seconds,
        "start_seconds_internal": control_plane.start_seconds,
        "phases_seconds": {"resolve": resolved - started, "prepare": prepared - resolved,
                           "processes_to_ready": ready - prepared},
        "stop_seconds": stop_seconds,
        "rss_mb": {name: value / 2**20 for name, value in rss.items()},
        "rss_total_mb": sum(rss.values()) / 2**20,
        "anon_mb": anonymous,
        "anon_total_mb": sum(anonymous.values()),
        "python_rss_mb": own_rss / 2**20,
    }), flush=True)
    return 0


# -- the driver ------------------------------------------------------------------------


def _last_json_line(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON line in output: {text[-500:]!r}")


def run_ours(version: str, readiness: str = "full") -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-m", "bench.bench_controlplane", "--child",
                             "--k8s-version", version, "--readiness", readiness],
                            cwd=ROOT, capture_output=True,
                            text=True, timeout=RUN_TIMEOUT, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"our run failed ({result.returncode}): {result.stderr[-2000:]}")
    return _last_json_line(result.stdout)


def run_go(assets: Path) -> dict[str, Any]:
    result = subprocess.run([str(GO_BINARY), "-assets", str(assets), "-runs", "1"],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"Go envtest run failed ({result.returncode}): "
                           f"{result.stderr[-2000:]}")
    return _last_json_line(result.stdout)


def assets_dir(version: str) -> Path:
    """The directory of the version's binaries, as ``envtest use <v> -p path`` prints it."""
    result = subprocess.run([str(BIN_DIR / "envtest"), "use", version, "-p", "path"],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    if result.returncode != 0:
        raise SystemExit(f"envtest use {version} failed: {result.stderr}")
    directory = Path(result.stdout.strip().splitlines()[-1].strip())
    if not (directory / "kube-apiserver").is_file() or not (directory / "etcd").is_file():
        raise SystemExit(f"no kube-apiserver/etcd in {directory}")
    return directory


def go_binary() -> Path:
    """The Go envtest timer, built with the local Go if it is missing."""
    if GO_BINARY.is_file():
        return GO_BINARY
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).is_file():
        raise SystemExit("bench/go-envtest/bin/go-envtest is missing and Go is not installed")
    print(f"building {GO_BINARY} with {go} (once) ...", file=sys.stderr, flush=True)
    subprocess.run([go, "build", "-o", "bin/go-envtest", "."], cwd=GO_DIR, check=True)
    return GO_BINARY


def stats(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None, "q1": None, "q3": None,
                "iqr": None, "stdev": None}
    ordered = sorted(values)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return {
        "n": len(ordered),
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "stdev": statistics.stdev(ordered) if len(ordered) >= 2 else 0.0,
    }


def _row(label: str, s: dict[str, Any], unit: str, digits: int = 3) -> str:
    if not s["n"]:
        return f"{label:<34} {'(no data)':>10}"

    def f(value: float) -> str:
        return f"{value:.{digits}f}"

    return (f"{label:<34} {f(s['median']):>9}{unit} {f(s['min']):>9} {f(s['max']):>9} "
            f"{f(s['iqr']):>9} {f(s['stdev']):>9} {s['n']:>4}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="interleaved runs per side (>= 5)")
    parser.add_argument("--k8s-version", default=os.environ.get("ENVTEST_K8S_VERSION", "1.37"))
    parser.add_argument("--no-go", action="store_true", help="measure ours only")
    parser.add_argument("--no-warmup", action="store_true",
                        help="skip the untimed first run of each side (page cache warm-up)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--readiness", default="full", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        return child(args.k8s_version, args.readiness)
    if args.runs < 5:
        print(f"note: {args.runs} runs requested; medians of fewer than 5 are rough",
              file=sys.stderr)

    assets = assets_dir(args.k8s_version)
    version = assets.name.split("-")[0]  # 1.37.2-linux-amd64 -> 1.37.2
    go = None if args.no_go else go_binary()
    load_before = os.getloadavg()
    print(f"Kubernetes {version} binaries in {assets}")
    print(f"machine: {os.cpu_count()} CPUs, load average {load_before[0]:.2f} "
          f"{load_before[1]:.2f} {load_before[2]:.2f} (1/5/15 min)")
    print(f"{args.runs} interleaved runs per side"
          f"{'' if args.no_warmup else ' after one untimed warm-up run each'}\n", flush=True)

    if not args.no_warmup:
        run_ours(version)
        if go:
            run_go(assets)

    ours: list[dict[str, Any]] = []
    ours_admin: list[dict[str, Any]] = []
    sessions: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    errors: list[str] = []
    for index in range(1, args.runs + 1):
        load = os.getloadavg()[0]
        try:
            mine = run_ours(version)
            mine["load1"] = load
            ours.append(mine)
            line = (f"run {index}: ours start {mine['start_seconds']:.3f} s "
                    f"stop {mine['stop_seconds']:.3f} s rss {mine['rss_total_mb']:.0f} MiB")
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            errors.append(f"ours run {index}: {exc}")
            line = f"run {index}: ours FAILED ({str(exc)[:200]})"
        try:
            admin = run_ours(version, "admin")
            ours_admin.append(admin)
            line += f" | ours (admin readiness) start {admin['start_seconds']:.3f} s"
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            errors.append(f"ours (admin readiness) run {index}: {exc}")
        try:
            session = run_session(version)
            sessions.append(session)
            line += (f" | session's first plane {session['session_start_seconds']:.3f} s, "
                     f"pool wait {session['pool_wait_seconds']:.3f} s")
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            errors.append(f"pytest session run {index}: {exc}")
        if go:
            try:
                go_run = run_go(assets)
                go_run["load1"] = os.getloadavg()[0]
                theirs.append(go_run)
                line += (f" | Go start {go_run['start_seconds']:.3f} s "
                         f"stop {go_run['stop_seconds']:.3f} s")
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                errors.append(f"Go run {index}: {exc}")
                line += f" | Go FAILED ({str(exc)[:200]})"
        print(f"{line}  (load {load:.2f})", flush=True)
    load_after = os.getloadavg()

    summary = {
        "ours": {
            "start_seconds": stats([r["start_seconds"] for r in ours]),
            "start_seconds_internal": stats([r["start_seconds_internal"] for r in ours]),
            "stop_seconds": stats([r["stop_seconds"] for r in ours]),
            "phase_resolve_seconds": stats([r["phases_seconds"]["resolve"] for r in ours]),
            "phase_prepare_seconds": stats([r["phases_seconds"]["prepare"] for r in ours]),
            "phase_processes_to_ready_seconds": stats(
                [r["phases_seconds"]["processes_to_ready"] for r in ours]),
            "rss_total_mb": stats([r["rss_total_mb"] for r in ours]),
            "anon_total_mb": stats([r["anon_total_mb"] for r in ours]),
            "rss_etcd_mb": stats([r["rss_mb"].get("etcd", 0.0) for r in ours]),
            "rss_apiserver_mb": stats([r["rss_mb"].get("kube-apiserver", 0.0) for r in ours]),
        },
        "ours_admin_readiness": {
            "start_seconds": stats([r["start_seconds"] for r in ours_admin]),
            "stop_seconds": stats([r["stop_seconds"] for r in ours_admin]),
        },
        "ours_in_pytest": {
            "session_start_seconds": stats([r["session_start_seconds"] for r in sessions]),
            "pool_wait_seconds": stats([r["pool_wait_seconds"] for r in sessions]),
        },
        "go_envtest": {
            "start_seconds": stats([r["start_seconds"] for r in theirs]),
            "stop_seconds": stats([r["stop_seconds"] for r in theirs]),
        },
    }
    ours_start = summary["ours"]["start_seconds"]["median"]
    go_start = summary["go_envtest"]["start_seconds"]["median"]
    ratio = ours_start / go_start if ours_start and go_start else None
    admin_start = summary["ours_admin_readiness"]["start_seconds"]["median"]
    admin_ratio = admin_start / go_start if admin_start and go_start else None
    session_start = summary["ours_in_pytest"]["session_start_seconds"]["median"]
    pool_wait = summary["ours_in_pytest"]["pool_wait_seconds"]["median"]
    session_ratio = session_start / go_start if session_start and go_start else None
    pool_ratio = pool_wait / go_start if pool_wait is not None and go_start else None
    ours_stop = summary["ours"]["stop_seconds"]["median"]
    go_stop = summary["go_envtest"]["stop_seconds"]["median"]

    header = (f"{'':<34} {'median':>10} {'min':>9} {'max':>9} {'IQR':>9} {'stdev':>9} "
              f"{'n':>4}")
    print("\n" + header)
    print("-" * len(header))
    print(_row("ours start to ready", summary["ours"]["start_seconds"], "s"))
    print(_row("  resolve binaries (cache)", summary["ours"]["phase_resolve_seconds"], "s"))
    print(_row("  private dirs + PKI", summary["ours"]["phase_prepare_seconds"], "s"))
    print(_row("  spawn to ready + default ns", summary["ours"]["phase_processes_to_ready_seconds"],
               "s"))
    print(_row("ours start, admin readiness", summary["ours_admin_readiness"]["start_seconds"],
               "s"))
    print(_row("Go envtest start to ready", summary["go_envtest"]["start_seconds"], "s"))
    print(_row("ours stop", summary["ours"]["stop_seconds"], "s"))
    print(_row("Go envtest stop", summary["go_envtest"]["stop_seconds"], "s"))
    print(_row("pytest: the session's first plane",
               summary["ours_in_pytest"]["session_start_seconds"], "s"))
    print(_row("pytest: a plane from the pool", summary["ours_in_pytest"]["pool_wait_seconds"],
               "s"))
    print(_row("ours RSS etcd + apiserver", summary["ours"]["rss_total_mb"], "M", 0))
    print(_row("ours anonymous etcd + apiserver", summary["ours"]["anon_total_mb"], "M", 0))
    print(_row("  etcd", summary["ours"]["rss_etcd_mb"], "M", 0))
    print(_row("  kube-apiserver", summary["ours"]["rss_apiserver_mb"], "M", 0))
    print()
    if ratio is not None:
        verdict = "meets" if ratio <= START_TARGET_RATIO else "misses"
        print(f"headline: median start ours / Go envtest = {ours_start:.3f} / {go_start:.3f} "
              f"= {ratio:.2f}x ({verdict} the {START_TARGET_RATIO}x target)")
    if admin_ratio is not None:
        verdict = "meets" if admin_ratio <= START_TARGET_RATIO else "misses"
        print(f"with readiness='admin' (the default): {admin_start:.3f} / "
              f"{go_start:.3f} = {admin_ratio:.2f}x ({verdict} the target)")
    if session_ratio is not None and pool_ratio is not None:
        print(f"in pytest: the session's first plane {session_start:.3f} s = "
              f"{session_ratio:.2f}x Go envtest's start; a plane from the pool "
              f"{pool_wait:.3f} s = {pool_ratio:.3f}x")
    if ours_stop is not None:
        go_part = f", Go envtest {go_stop:.3f} s" if go_stop is not None else ""
        print(f"stop medians: ours {ours_stop:.3f} s{go_part} (target: ours under "
              f"{STOP_TARGET_SECONDS:g} s)")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min, "
          f"{os.cpu_count()} CPUs)")
    for error in errors:
        print(f"error: {error[:500]}", file=sys.stderr)

    document = {
        "benchmark": "controlplane start/stop",
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "kubernetes_version": version,
        "assets": str(assets),
        "runs_requested": args.runs,
        "interleaved": True,
        "warmup": not args.no_warmup,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_before": list(load_before),
            "load_average_after": list(load_after),
        },
        "summary": summary,
        "headline": {
            "start_ratio_ours_over_go": ratio,
            "start_ratio_admin_readiness_over_go": admin_ratio,
            "session_start_ratio_over_go": session_ratio,
            "pool_wait_ratio_over_go": pool_ratio,
            "rss_total_mb": summary["ours"]["rss_total_mb"]["median"],
            "anon_total_mb": summary["ours"]["anon_total_mb"]["median"],
            "start_ratio_target": START_TARGET_RATIO,
            "ours_start_median_seconds": ours_start,
            "go_start_median_seconds": go_start,
            "ours_stop_median_seconds": ours_stop,
            "go_stop_median_seconds": go_stop,
            "stop_target_seconds": STOP_TARGET_SECONDS,
        },
        "runs": {"ours": ours, "ours_admin_readiness": ours_admin, "ours_in_pytest": sessions,
                 "go_envtest": theirs},
        "errors": errors,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    temporary = args.output.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(document, indent=2) + "\n")
    temporary.replace(args.output)
    shown = args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output
    print(f"wrote {shown}")
    return 1 if errors and not ours else 0


if __name__ == "__main__":
    sys.exit(main())
