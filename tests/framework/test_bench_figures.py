"""The scale figure the README gives (ours against KWOK's controller) is measured by a neutral
observer (``bench/pod_watch.py``), and the README says what the bench wrote.

The observer times both simulators, so it is checked here against a known sequence: Pods
made Ready and deleted by the test itself, on the real control plane.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envtest import eventually

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


def _pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def test_the_observer_counts_each_pod_ready_once_and_each_deletion(k8s, kubeconfig, namespace,
                                                                     pods) -> None:
    for name in ("a", "b", "c"):
        k8s.core.create_namespaced_pod(namespace, _pod(name))
    observer = subprocess.Popen([sys.executable, "-m", "bench.pod_watch", str(kubeconfig),
                                 namespace], cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    lines: list[dict[str, object]] = []
    try:
        assert observer.stdout is not None
        while not json.loads(observer.stdout.readline())["listed"]:
            pass  # it has not listed yet: a change now might come before what it lists
        started = time.time()
        pods.set_running("a")
        pods.set_running("b")
        pods.set_not_ready("b")
        pods.set_ready("b")  # Ready twice: counted once, at its first time
        k8s.core.delete_namespaced_pod("c", namespace, grace_period_seconds=0)

        def settled() -> dict[str, object] | None:
            lines.append(json.loads(observer.stdout.readline()))
            return lines[-1] if lines[-1]["ready"] == 2 and lines[-1]["deleted"] == 1 else None

        last = eventually(settled, timeout=30,
                          message="the observer never saw 2 Pods Ready and 1 deleted")
        assert isinstance(last["last_ready_at"], float)
        assert started <= last["last_ready_at"] <= time.time()
        # and nothing more turns up: the counts stay
        for _ in range(2):
            assert json.loads(observer.stdout.readline())["ready"] == 2
    finally:
        assert observer.stdin is not None
        observer.stdin.close()
        observer.wait(timeout=30)
    assert observer.returncode == 0


@pytest.mark.parametrize("pods_in_run", [2000, 10000])
def test_the_readme_gives_the_kwok_ratio_the_bench_measured(pods_in_run: int) -> None:
    name = "workloads.json" if pods_in_run == 10000 else f"workloads-{pods_in_run}.json"
    report = json.loads((RESULTS / name).read_text())
    assert report["pods"] == pods_in_run and report["kwok_skipped"] is None
    runs = report["runs"]
    assert {r["simulator"] for r in runs} == {"envtest", "kwok"}
    assert all(r["all_ready_seconds"] is not None for r in runs), "a run never got all Ready"
    ratio = report["compared"]["all_ready_seconds"]["ratio_envtest_to_kwok"]
    readme = (ROOT / "README.md").read_text()
    said = re.search(rf"{pods_in_run:,} Pods[^.]*?([0-9.]+)x KWOK", readme)
    assert said, f"the README gives no ratio to KWOK for {pods_in_run:,} Pods"
    assert float(said.group(1)) == ratio


def test_the_readme_gives_the_exploration_figures_the_bench_measured() -> None:
    """Points a minute and the false-positive rate, as bench_exploration wrote them, and every
    finding of the measured run read (its review says real or not, and why)."""
    results = json.loads((RESULTS / "exploration.json").read_text())
    reviews = json.loads((RESULTS / "exploration-review.json").read_text())
    ours = results["operators"]["ours"]
    rate = results["false_positive_rate"]
    assert set(results["operators"]) == {"ours", "kopf", "go"}
    assert rate["unreviewed"] == 0, "a finding nobody read"
    for row in results["operators"].values():
        for finding in row["detail"]:
            assert finding["key"] in reviews and reviews[finding["key"]]["why"], finding
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"{ours['points']} points in {ours['wall'] / 60:.1f} min on `-n 2` " \
           f"({ours['points_per_minute']} a minute" in readme
    assert ours["points_per_minute"] >= 30
    findings = rate["findings"]
    assert (f"{rate['false_positives']} of {findings} finding{'s' if findings != 1 else ''} "
            f"false positives ({rate['percent']} %; Sieve: 3.5 %)") in readme
    reviewed = rate["reviewed"]
    assert reviewed["findings"] == len(reviews)
    assert reviewed["false_positives"] == sum(1 for r in reviews.values() if not r["real"])
    assert (f"{reviewed['findings']} findings were read (`bench/results/exploration-review.json`"
            f"): {reviewed['false_positives']} false positives ({reviewed['percent']} %)") \
        in readme
    real = reviewed["findings"] - reviewed["false_positives"]
    assert f"and fixed, {real} real" in readme
    examples = [results["operators"][name] for name in ("kopf", "go")]
    assert (f"The kopf example ({examples[0]['points']} points, every kind) and the Go order "
            f"keeper ({examples[1]['points']} points)") in readme


def test_the_readme_gives_the_start_figures_the_bench_measured() -> None:
    """Start ratios to Go envtest (alone, the session's first plane, a plane from the pool)
    and the memory of a lean plane, as bench_controlplane wrote them."""
    headline = json.loads((RESULTS / "controlplane.json").read_text())["headline"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    admin = headline["start_ratio_admin_readiness_over_go"]
    assert f"(the default) {admin:.2f}x of Go envtest's start" in readme
    assert "the session's first plane " in readme
    assert f"({headline['session_start_ratio_over_go']:.2f}x;" in readme
    assert f"({headline['pool_wait_ratio_over_go']:.3f}x)" in readme
    assert headline["pool_wait_ratio_over_go"] < 0.1
    assert f"{headline['anon_total_mb']:.0f} MiB," in readme


def test_the_readme_gives_the_user_suite_figures_the_bench_measured() -> None:
    """A user's suite serial and under ``-n 2`` (shared planes and not), as
    bench_user_suite wrote them, and the Go runtime trade-off bench_footprint measured."""
    suite = json.loads((RESULTS / "user-suite.json").read_text())
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"a user's suite of {suite['tests']} tests" in readme
    assert (f"took {suite['serial_s']:.2f} s serially, {suite['xdist2_s']:.2f} s with `-n 2` "
            f"and shared planes ({suite['ratio']:.2f}x, one plane started) and "
            f"{suite['xdist2_unshared_s']:.2f} s with `-n 2` as before "
            f"({suite['ratio_unshared']:.2f}x, two planes") in readme
    assert (f"serially it keeps {suite['cores_busy']['serial']:.2f} of the 2 cores busy "
            f"({suite['cpu_s']['serial']:.1f} CPU-s)") in readme
    assert suite["planes_started"] == {"serial": 1, "xdist2": 1, "xdist2_unshared": 2}
    waiting = json.loads((RESULTS / "user-suite-pod-start.json").read_text())
    assert waiting["pod_start_s"] == 2.0 and waiting["tests"] == suite["tests"]
    assert (f"the same suite with every Pod taking {waiting['pod_start_s']:.0f} s to be Ready"
            in readme)
    assert (f"took {waiting['serial_s']:.2f} s serially, {waiting['xdist2_s']:.2f} s with "
            f"`-n 2` and shared planes ({waiting['ratio']:.2f}x, one plane started) and "
            f"{waiting['xdist2_unshared_s']:.2f} s with `-n 2` as before "
            f"({waiting['ratio_unshared']:.2f}x)") in readme
    assert (f"serially it keeps {waiting['cores_busy']['serial']:.2f} of the 2 cores busy, "
            f"and `-n 2` spends {waiting['cpu_s']['xdist2']:.1f} CPU-s where serial spends "
            f"{waiting['cpu_s']['serial']:.1f}") in readme
    assert waiting["planes_started"] == {"serial": 1, "xdist2": 1, "xdist2_unshared": 2}
    go = json.loads((RESULTS / "footprint-go-runtime.json").read_text())["medians"]
    lean, fast = go["GOGC=50 (lean)"], go["GOGC=400"]
    assert (f"GOGC=50 (lean) {lean['start_seconds']:.2f} s, "
            f"{lean['total_anon_mib']:.0f} MiB anonymous; GOGC=400 "
            f"{fast['start_seconds']:.2f} s, {fast['total_anon_mib']:.0f} MiB") in readme


def test_the_readme_gives_the_namespace_sweep_figures_the_bench_measured() -> None:
    """The sweep told what was written against every collection, as bench_namespace_sweep
    wrote them: fewer calls and less CPU on both sides."""
    sweep = json.loads((RESULTS / "namespace-sweep.json").read_text())["medians"]
    written, every = sweep["written"], sweep["every"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (f"{written['deletecollections']:.0f} `deletecollection` calls instead of "
            f"{every['deletecollections']:.0f}, {written['server_cpu_ms']:.0f} ms of etcd and "
            f"kube-apiserver CPU instead of {every['server_cpu_ms']:.0f} and "
            f"{written['client_cpu_ms']:.0f} ms of the sweeper's instead of "
            f"{every['client_cpu_ms']:.0f} per namespace") in readme
    assert written["deletecollections"] < every["deletecollections"] / 3
    assert written["server_cpu_ms"] < every["server_cpu_ms"]


def test_the_readme_gives_the_real_kuberay_figures_the_bench_measured() -> None:
    """The real ray-operator's curve, as bench_kuberay_real wrote it (medians of 3 runs):
    each row of the README's table, and the seed's shape (v0.5.0 more status writes than
    v0.6.0 at both delays, v0.6.0 at most 13, no Dashboard call of v0.6.0 before the head
    was Ready)."""
    rows = json.loads((RESULTS / "kuberay-real.json").read_text())["rows"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert len(rows) == 4
    for row in rows:
        line = (f"| {row['version']}, {row['head_delay_s']:g} s | {row['status_writes']} | "
                f"{row['timestamp_only_writes']} | {row['calls_before_head_ready']} |")
        assert line in readme, line
    by = {(row["version"], row["head_delay_s"]): row for row in rows}
    for delay in (3, 30):
        old, new = by[("v0.5.0", delay)], by[("v0.6.0", delay)]
        assert old["status_writes"] > new["status_writes"] and new["status_writes"] <= 13
        assert new["calls_before_head_ready"] == 0 < old["calls_before_head_ready"]


def test_the_readme_gives_the_known_bugs_the_bench_found() -> None:
    """Found of tried, each bug's points and minutes, the fixed releases' findings and the
    false-positive rate, as bench_known_bugs wrote them; every finding read."""
    results = json.loads((RESULTS / "known-bugs.json").read_text())
    readme = " ".join((ROOT / "README.md").read_text().split())
    bugs = results["bugs"]
    found = [b for b in bugs if b["found"]]
    assert results["found"] == f"{len(found)}/{len(bugs)}"
    assert f"**Found {len(found)} of {len(bugs)}**" in readme
    for bug in bugs:
        number = bug["bug"].rsplit("#", 1)[1]
        run = bug["buggy_run"]
        if bug["found"]:
            assert f"#{number} ({bug['pattern']}" in readme, number
            points = "1 point" if run["points"] == 1 else f"{run['points']} points"
            assert f"{points} in {run['minutes']} min" in readme, number
        else:
            assert f"Not found: #{number} ({bug['pattern']}" in readme, number
    rate = results["false_positive_rate"]
    assert rate["unreviewed"] == 0, "a finding nobody read"
    assert (f"{rate['findings']} findings, {rate['false_positives']} false positives "
            f"({rate['percent']} %; Sieve: 3.5 %)") in readme
    fixed_points = sum(b["fixed_run"]["points"] for b in bugs if b["fixed_run"])
    assert sum(b["fixed_findings"] for b in bugs) == 0
    assert f"gave no finding of their bug and no false one in {fixed_points} points" in readme
    other = sum(b.get("fixed_other_true", 0) for b in bugs)
    assert (f"({'one' if other == 1 else other} true finding{'s' if other > 1 else ''} of "
            "another behaviour") in readme if other else True


def test_the_readme_gives_the_false_alarms_the_bench_counted() -> None:
    """Each example operator's tests and points, and the false alarms of them all, as
    bench_false_alarms wrote them; every finding it counted read."""
    results = json.loads((RESULTS / "false-alarms.json").read_text())
    readme = " ".join((ROOT / "README.md").read_text().split())
    operators = results["operators"]
    assert {row["name"] for row in operators} == {"ray", "lightkube", "kopf", "go"}
    assert results["points"] == sum(row["points"] for row in operators)
    assert results["false_alarms"] == sum(row["false_alarms"] for row in operators)
    for row in operators:
        assert f"{row['name']}: {row['tests']} tests, {row['points']} points" in readme, row
        assert row["exit"] in (0, 1) and not row["nothing"], row
    assert (f"**{results['false_alarms']} false alarms in {results['points']} points**"
            in readme)


def test_the_readme_gives_the_operations_false_alarms_the_bench_counted() -> None:
    """The user's side on the same operators: its points and false alarms, and how far into
    each search its first failing trial came (the search's, with the trial's number), as
    ``bench_false_alarms --kinds operations`` wrote them."""
    results = json.loads((RESULTS / "false-alarms-operations.json").read_text())
    readme = " ".join((ROOT / "README.md").read_text().split())
    operators = results["operators"]
    assert results["false_alarms"] == sum(row["false_alarms"] for row in operators) == 0
    for row in operators:
        assert (f"{row['name']} {row['points']} point" if row["points"] else
                f"{row['name']} no point") in readme, row
    assert (f"**{results['false_alarms']} false alarms in {results['points']} points**"
            in readme)
    failures = [o for run in results["runs"].values() for test in run["tests"]
                for o in test["outcomes"] if o.get("first_failure_after") is not None]
    seconds = sorted(o["first_failure_after"] for o in failures)
    trials = sorted(o["first_failure_trial"] for o in failures)
    assert (f"the first failing trial {seconds[0]:.1f} to {seconds[-1]:.1f} s into each "
            f"search (its trial {trials[0]} to {trials[-1]})") in readme

