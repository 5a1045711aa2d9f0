"""Exploration's verdicts on operators whose behaviour under each fault is known.

One receipt keeper (for each ConfigMap labelled ``order``: a receipt, and the
order marked done) is built in the ways that make each verdict: a test that
fails on its first faulted run only (flaky), a restarted instance that takes
3 s to start (a slow recovery within the grace period, a bug past a shorter
one), an unsafe order the test expects to break (expected), receipts owned by
the order and remembered in memory (duplicate children), and a per-instance
annotation (noise the two clean runs teach).  Each verdict is checked in the
``--envtest-explore-json`` file against what the operator is known to do.
Under pytest-xdist the points are shared by both workers, and two CI shards
merged by ``envtest explore-merge`` make the unsharded exploration's points.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

pytest_plugins = ["pytester"]
ENVTEST_CLI = Path(sys.executable).parent / "envtest"

KEEPERS = textwrap.dedent('''
    """Receipt keepers: for each ConfigMap labelled order, a receipt, then the order done."""

    import threading
    import time
    import uuid

    import kubernetes


    def receipt_keeper(namespace, done_first=False, slow_restart=0.0, forget=False,
                       annotate=False):
        """``done_first``: mark the order done, then make its receipt (crash-unsafe unless
        every order is checked for its receipt on each pass, which this one does unless
        ``forget``); ``slow_restart``: an instance after the first waits that long before
        it starts; ``forget``: receipts by generateName, owned by the order, remembered in
        memory (a fresh instance makes another); ``annotate``: each instance stamps its
        receipts with an id of its own."""
        starts = []

        def run(api_client, stop: threading.Event) -> None:
            starts.append(time.monotonic())
            if len(starts) > 1 and stop.wait(slow_restart):
                return
            core = kubernetes.client.CoreV1Api(api_client)
            instance = uuid.uuid4().hex[:8]
            made = set()
            while not stop.wait(0.05):
                try:
                    for order in core.list_namespaced_config_map(
                            namespace, label_selector="order").items:
                        name = order.metadata.name
                        if forget and order.metadata.labels["order"] == "done":
                            continue  # its receipt was made (by this instance, it thinks)
                        if done_first and order.metadata.labels["order"] == "open":
                            core.patch_namespaced_config_map(
                                name, namespace, {"metadata": {"labels": {"order": "done"}}})
                        receipt = {"metadata": {"labels": {"receipt-of": name}}}
                        if annotate:
                            receipt["metadata"]["annotations"] = {"example.com/by": instance}
                        if forget:
                            receipt["metadata"]["generateName"] = f"{name}-receipt-"
                            receipt["metadata"]["ownerReferences"] = [{
                                "apiVersion": "v1", "kind": "ConfigMap", "name": name,
                                "uid": order.metadata.uid}]
                            if name not in made:
                                core.create_namespaced_config_map(namespace, receipt)
                                made.add(name)
                        else:
                            receipt["metadata"]["name"] = f"{name}-receipt"
                            try:
                                core.create_namespaced_config_map(namespace, receipt)
                            except kubernetes.client.ApiException as error:
                                if error.status != 409:
                                    raise
                        if order.metadata.labels["order"] == "open":
                            core.patch_namespaced_config_map(
                                name, namespace, {"metadata": {"labels": {"order": "done"}}})
                except kubernetes.client.ApiException:
                    continue

        return run
''')

TESTS = textwrap.dedent('''
    import os

    import pytest

    from envtest import eventually

    import keepers


    def place(k8s, namespace, *names):
        for name in names:
            k8s.core.create_namespaced_config_map(
                namespace, {"metadata": {"name": name, "labels": {"order": "open"}}})
        for name in names:
            eventually(lambda: k8s.core.read_namespaced_config_map(
                name, namespace).metadata.labels["order"] == "done", timeout=10)


    def runs(name):
        """How many times this test ran (the counter file counts every run)."""
        path = os.path.join(os.environ["COUNTERS"], name)
        count = int(open(path).read()) + 1 if os.path.exists(path) else 1
        open(path, "w").write(str(count))
        return count


    def test_flaky(run_operator, k8s, namespace):
        run_operator(keepers.receipt_keeper(namespace))
        place(k8s, namespace, "o")
        # Runs: two clean runs, then the first point's: it fails once, its re-run passes.
        assert runs("flaky") != 3, "failed on the first faulted run only"


    def test_flaky_end_state(run_operator, k8s, namespace):
        run_operator(keepers.receipt_keeper(namespace))
        place(k8s, namespace, "o")
        if runs("flaky_end_state") == 3:  # the first faulted run leaves a stray object behind
            k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "stray"}})


    @pytest.mark.envtest_explore("crashes", grace=6)
    def test_slow(run_operator, k8s, namespace):
        run_operator(keepers.receipt_keeper(namespace, done_first=True, slow_restart=3))
        place(k8s, namespace, "o")


    @pytest.mark.envtest_explore("crashes", grace=0.5)
    def test_too_slow(run_operator, k8s, namespace):
        run_operator(keepers.receipt_keeper(namespace, done_first=True, slow_restart=1.5))
        place(k8s, namespace, "o")


    @pytest.mark.envtest_explore_expect("crash after the 1st patch of configmaps o",
                                        reason="a receipt made after the order is done is "
                                               "lost with the instance that was to make it")
    def test_expected(run_operator, k8s, namespace):
        run_operator(keepers.receipt_keeper(namespace, done_first=True, forget=True))
        place(k8s, namespace, "o")
        eventually(lambda: k8s.core.list_namespaced_config_map(
            namespace, label_selector="receipt-of=o").items, timeout=3)


    def test_duplicates(run_operator, k8s, namespace):
        run_operator(keepers.receipt_keeper(namespace, forget=True))
        place(k8s, namespace, "o")


    def test_noise(run_operator, k8s, namespace):
        run_operator(keepers.receipt_keeper(namespace, annotate=True))
        place(k8s, namespace, "o")


    def test_many(run_operator, k8s, namespace):
        run_operator(keepers.receipt_keeper(namespace))
        place(k8s, namespace, "a", "b", "c")
''')


def _verdicts(summary: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(summary.read_text())
    return {test["nodeid"].split("::")[-1]: test for test in data["tests"]}


def _by_verdict(test: dict[str, Any]) -> dict[str, list[str]]:
    """Each verdict's points, by their labels (the request each faults)."""
    found: dict[str, list[str]] = {}
    for outcome in test["outcomes"]:
        found.setdefault(outcome["verdict"], []).append(outcome["point"]["label"])
    return found


PATCH_O = "crash after the 1st patch of configmaps o"
RECEIPT = "crash after the 1st create of configmaps o-receipt"


def test_each_verdict_on_an_operator_known_to_earn_it(inner_pytester: Any, tmp_path: Path,
                                                      monkeypatch: Any) -> None:
    inner_pytester.makepyfile(keepers=KEEPERS, test_keepers=TESTS)
    monkeypatch.setenv("COUNTERS", str(tmp_path))
    summary = tmp_path / "summary.json"
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--envtest-explore=crashes", f"--envtest-explore-json={summary}",
        "-k", "not many", timeout=600)
    output = result.stdout.str()
    result.assert_outcomes(passed=4, failed=3)
    tests = _verdicts(summary)

    # The test's own assertion failed once under the crash, then passed with the same
    # request faulted: flaky, and it fails the run (a race under that fault).
    flaky = _by_verdict(tests["test_flaky"])
    assert flaky == {"flaky": [RECEIPT], "passed": [PATCH_O]} or flaky == {
        "flaky": [PATCH_O], "passed": [RECEIPT]}, flaky
    [first] = [o for o in tests["test_flaky"]["outcomes"] if o["verdict"] == "flaky"]
    assert "failed on the first faulted run only" in first["reason"] and first["own_failure"]
    assert len(first["faulted"]) == 2 and all("crash after" in f for f in first["faulted"])
    assert "FLAKY crash after the 1st" in output and "so it fails the run" in output, output
    # Only an oracle saw the first failure (a stray object): flaky, the run passes.
    flaky_state = _by_verdict(tests["test_flaky_end_state"])
    assert sorted(flaky_state) == ["flaky", "passed"], flaky_state
    [oracle] = [o for o in tests["test_flaky_end_state"]["outcomes"] if o["verdict"] == "flaky"]
    assert "extra: configmaps stray" in oracle["reason"] and not oracle["own_failure"], oracle

    slow = _by_verdict(tests["test_slow"])
    # The receipt's create is a point only when it came before the test returned (it follows
    # the patch the test waits for at once, but a loaded machine may return in between).
    assert slow.pop("slow recovery") == [PATCH_O] and set(slow) <= {"passed"}, slow
    recovered = tests["test_slow"]["outcomes"][0]["recovered_after"]
    assert 2 < recovered < 6, recovered  # the 3 s the fresh instance waits, about
    assert "recovered after" in output
    # The done-first keeper patches the order done a second time, from its stale copy: that
    # patch stores nothing, so a crash after it is a crash before it: merged.  (Only when it
    # came before the test returned, as the receipt's create: a loaded machine may return in
    # between, so of the three done-first tests one at least has it, and none other merges.)
    merges = [tests[name]["merged"] for name in ("test_slow", "test_too_slow", "test_expected")]
    assert {"no-op": 1} in merges and all(m in ({}, {"no-op": 1}) for m in merges), merges

    too_slow = _by_verdict(tests["test_too_slow"])
    assert too_slow["bug"] == [PATCH_O], too_slow
    [bug] = [o for o in tests["test_too_slow"]["outcomes"] if o["verdict"] == "bug"]
    assert bug["differences"] == ["never converged: missing: configmaps o-receipt"], bug

    expected = _by_verdict(tests["test_expected"])
    assert expected["expected"] == [PATCH_O], expected
    assert tests["test_expected"]["outcomes"][0]["reason"].startswith("a receipt made after")

    duplicates = [o for o in tests["test_duplicates"]["outcomes"] if o["verdict"] == "bug"]
    assert [o["point"]["label"] for o in duplicates] == [
        "crash after the 1st create of configmaps o-receipt-*"], duplicates
    assert "duplicate children: ConfigMap o owns 2 configmaps o-receipt-*, the clean run's " \
           "owned 1" in duplicates[0]["findings"], duplicates
    assert "churn: configmaps o-receipt-* made again 1 time (the clean runs: 0)" in \
        duplicates[0]["findings"], duplicates

    noise = tests["test_noise"]
    assert _by_verdict(noise) == {"passed": [PATCH_O, RECEIPT]} or _by_verdict(noise) == {
        "passed": [RECEIPT, PATCH_O]}, noise
    assert noise["noise"] == ["configmaps o-receipt: metadata.annotations.example.com/by"], noise
    assert "7 test(s) explored:" in output and "2 bugs, 1 slow recovery, 2 flaky" in output, \
        output[-3000:]


def test_points_go_to_both_workers_and_shards_merge_to_the_whole(
        own_plane_pytester: Any, tmp_path: Path, monkeypatch: Any) -> None:
    own_plane_pytester.makepyfile(keepers=KEEPERS, test_keepers=TESTS)
    monkeypatch.setenv("COUNTERS", str(tmp_path))
    shards = []
    for shard in ("1/2", "2/2"):
        target = tmp_path / f"shard-{shard[0]}.json"
        result = own_plane_pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-n", "2", "--envtest-explore=crashes",
            f"--envtest-explore-shard={shard}", f"--envtest-explore-json={target}",
            "test_keepers.py::test_many", timeout=600)
        result.assert_outcomes(passed=2)  # the test and its point runner
        shards.append(target)
    # Three orders: three creates and three patches, six crash points, three per shard.
    first, second = (_verdicts(path)["test_many"] for path in shards)
    specs = [sorted(o["point"]["spec"] for o in t["outcomes"]) for t in (first, second)]
    assert [len(s) for s in specs] == [3, 3] and not set(specs[0]) & set(specs[1]), specs
    every = {f"crash after the 1st {verb} of configmaps {name}" for verb, names in (
        ("create", ("a-receipt", "b-receipt", "c-receipt")), ("patch", ("a", "b", "c")))
        for name in names}
    assert first["shard"] == "1/2" and first["chosen"] == 6
    workers = {o["worker"] for t in (first, second) for o in t["outcomes"]}
    assert workers == {"gw0", "gw1"}, "every point on one worker: not shared"

    merged = tmp_path / "merged.json"
    merge = subprocess.run([str(ENVTEST_CLI), "explore-merge", *map(str, shards), "--json",
                            str(merged)], capture_output=True, text=True, timeout=60)
    assert merge.returncode == 0, merge.stdout + merge.stderr
    whole = _verdicts(merged)["test_many"]
    assert {o["point"]["label"] for o in whole["outcomes"]} == every, whole
    assert "1 test(s) explored: 6 point(s) run: 0 bugs, 6 passed" in merge.stdout, merge.stdout
    bad = subprocess.run([str(ENVTEST_CLI), "explore-merge", str(tmp_path / "nothing.json")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "does not exist: give the files" in bad.stdout + bad.stderr
