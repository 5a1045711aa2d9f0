"""A run that parted from the clean runs before its fault is not blamed on the fault.

The stamper makes, for each ConfigMap labelled ``order``, a stamp ConfigMap labelled with
the ``path`` its test hands it, then marks the order done.  The test hands it the path
``usual`` in its two clean runs and ``other`` in every later run: as an operator's own race
would, the faulted runs take another path from their start, before any fault.  Explored for
crashes, every point's end state differs in that label, written before the crash: no point
is a bug, and the summary names the field.  Its twin stamps each instance's number instead,
so the label differs only in a restarted instance, after the crash: the fault's doing, a
bug at each point that restarts it before the stamp is final (the rule excuses nothing the
fault could have caused).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

pytest_plugins = ["pytester"]

STAMPERS = textwrap.dedent('''
    """Stampers: for each ConfigMap labelled order, a stamp labelled with a path, then the
    order done."""

    import threading

    import kubernetes


    def stamper(namespace, path=None):
        """``path``: the label every instance stamps; None: each instance its own number
        (the first instance ``1``, a restarted one ``2``...)."""
        starts = []

        def run(api_client, stop: threading.Event) -> None:
            starts.append(1)
            label = path or str(len(starts))
            core = kubernetes.client.CoreV1Api(api_client)
            while not stop.wait(0.05):
                try:
                    for order in core.list_namespaced_config_map(
                            namespace, label_selector="order").items:
                        name = order.metadata.name
                        stamp = f"{name}-stamp"
                        try:
                            core.create_namespaced_config_map(namespace, {"metadata": {
                                "name": stamp, "labels": {"path": label}}})
                        except kubernetes.client.ApiException as error:
                            if error.status != 409:
                                raise
                            found = core.read_namespaced_config_map(stamp, namespace)
                            if found.metadata.labels.get("path") != label:
                                core.patch_namespaced_config_map(stamp, namespace, {
                                    "metadata": {"labels": {"path": label}}})
                        if order.metadata.labels["order"] == "open":
                            core.patch_namespaced_config_map(
                                name, namespace, {"metadata": {"labels": {"order": "done"}}})
                except kubernetes.client.ApiException:
                    continue

        return run
''')

TESTS = textwrap.dedent('''
    import os

    from envtest import eventually

    import stampers


    def runs(name):
        """How many times this test ran (the counter file counts every run)."""
        path = os.path.join(os.environ["COUNTERS"], name)
        count = int(open(path).read()) + 1 if os.path.exists(path) else 1
        open(path, "w").write(str(count))
        return count


    def place(k8s, namespace):
        k8s.core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "o", "labels": {"order": "open"}}})
        eventually(lambda: k8s.core.read_namespaced_config_map(
            "o", namespace).metadata.labels["order"] == "done", timeout=10)


    def test_parted_before_the_fault(run_operator, k8s, namespace):
        path = "usual" if runs("parted") <= 2 else "other"
        run_operator(stampers.stamper(namespace, path))
        place(k8s, namespace)


    def test_parted_by_the_fault(run_operator, k8s, namespace):
        run_operator(stampers.stamper(namespace))
        place(k8s, namespace)
''')

PARTED = "configmaps o-stamp: metadata.labels.path"


def test_a_path_taken_before_the_fault_is_not_the_fault_s_and_one_taken_after_is(
        inner_pytester: Any, tmp_path: Path, monkeypatch: Any) -> None:
    inner_pytester.makepyfile(stampers=STAMPERS, test_stampers=TESTS)
    monkeypatch.setenv("COUNTERS", str(tmp_path))
    summary = tmp_path / "summary.json"
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--envtest-explore=crashes",
        f"--envtest-explore-json={summary}", timeout=600)
    output = result.stdout.str()
    tests = {t["nodeid"].split("::")[-1]: t for t in json.loads(summary.read_text())["tests"]}

    before = tests["test_parted_before_the_fault"]["outcomes"]
    assert before and {o["verdict"] for o in before} == {"passed"}, before
    # Every point's run stamped "other" before its crash: each names the field it left out.
    assert all(o["predating"] == [PARTED] for o in before), before
    assert "parted from the clean runs before the fault" in output and PARTED in output, \
        output[-3000:]

    after = {o["point"]["label"]: o for o in tests["test_parted_by_the_fault"]["outcomes"]}
    crash_on_create = after["crash after the 1st create of configmaps o-stamp"]
    # The restarted instance stamps "2" over the first one's "1": after the crash, judged.
    assert crash_on_create["verdict"] == "bug", crash_on_create
    assert crash_on_create["predating"] == [], crash_on_create
    assert crash_on_create["differences"] == [
        "never converged: changed: configmaps o-stamp: metadata.labels.path: '1' -> '2'"], \
        crash_on_create
    result.assert_outcomes(passed=1, failed=1)
