"""``--envtest-pod-plan``: what every Pod of the cluster profile does unless a test's own
``kubelet.plan`` says otherwise, on a worker's plane and on one the xdist workers share.

The delays are measured by the inner tests themselves, from their own watch of the Pod
(creation to the first event that shows it Running, then Ready), not from the engine's
records."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PLAN = "running_after=1,ready_after=1"

INNER = textwrap.dedent("""
    import json
    import os
    import time
    from pathlib import Path

    import kubernetes
    import pytest

    pytestmark = pytest.mark.envtest_profile("cluster")
    RECORDS = Path(__file__).parent / "records"


    def pod(name, labels=None):
        return {"metadata": {"name": name, "labels": labels or {}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


    def watch_pod(k8s, namespace, name, created):
        \"\"\"Seconds from creation to Running and to Ready (or Failed), as this test's own
        watch sees the Pod.\"\"\"
        seen = {}
        stream = kubernetes.watch.Watch().stream(
            k8s.core.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}",
            timeout_seconds=90)
        for event in stream:
            status = event["object"].status
            now = time.monotonic() - created
            if status.phase in ("Running", "Failed"):
                seen.setdefault(status.phase.lower(), now)
            if status.phase == "Failed" or any(
                    c.type == "Ready" and c.status == "True" for c in status.conditions or []):
                seen.setdefault("ready", now)
                return seen
        raise AssertionError(f"pod {name} never Ready nor Failed: {seen}")


    def run(k8s, namespace, name, envtest, labels=None):
        created = time.monotonic()
        k8s.core.create_namespaced_pod(namespace, pod(name, labels))
        seen = watch_pod(k8s, namespace, name, created)
        RECORDS.mkdir(exist_ok=True)
        (RECORDS / f"{name}.json").write_text(json.dumps({
            **seen, "server": envtest.server, "kind": type(envtest).__name__,
            "worker": os.environ.get("PYTEST_XDIST_WORKER")}))


    @pytest.mark.parametrize("index", range(2))
    def test_a_pod_of_the_session(index, envtest, k8s, namespace):
        run(k8s, namespace, f"session-{index}", envtest)


    def test_a_tests_own_plan_wins(envtest, k8s, namespace, kubelet):
        kubelet.plan("plan=own", outcome="failed", exit_code=3)
        run(k8s, namespace, "own", envtest, labels={"plan": "own"})
        run(k8s, namespace, "not-own", envtest)
""")


def records(directory: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text())
            for p in sorted((directory / "records").glob("*.json"))}


def test_every_pod_follows_the_session_plan_on_a_shared_plane_and_a_tests_plan_wins(
        own_plane_pytester: pytest.Pytester) -> None:
    own_plane_pytester.makepyfile(test_inner=INNER)
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2", "--envtest-share-planes",
        f"--envtest-pod-plan={PLAN}", timeout=300)
    result.assert_outcomes(passed=3)
    seen = records(own_plane_pytester.path)
    shared = [seen["session-0"], seen["session-1"]]
    assert {r["kind"] for r in shared} == {"SharedPlane"}  # the controller's engine moved them
    assert len({r["server"] for r in shared}) == 1
    # The test with a kubelet plan runs on its worker's own plane (its engine is there).
    assert seen["own"]["kind"] == "ControlPlane" and seen["own"]["server"] != shared[0]["server"]
    for name in ("session-0", "session-1", "not-own"):
        # Pending 1 s, then Running and not Ready 1 s: never sooner, however busy the machine.
        assert seen[name]["running"] >= 0.95, (name, seen[name])
        assert seen[name]["ready"] - seen[name]["running"] >= 0.95, (name, seen[name])
    # The test's own plan replaces the session's for the Pods it matches: Failed at once.
    assert "failed" in seen["own"] and seen["own"]["failed"] < seen["not-own"]["ready"], seen
    assert "shared by the xdist workers" in result.stdout.str()


@pytest.mark.parametrize("plan,said", [
    ("ready_after=soon", "ready_after is a number of seconds, not 'soon'"),
    ("logs=hello", "'logs=hello' is not name=value of a PodPlan field (running_after,"),
    ("outcome=dead", "outcome is one of ready, running, failed, succeeded, crashloop"),
    ("jitter=-1", "jitter must be 0 or more"),
])
def test_a_bad_pod_plan_is_a_usage_error_naming_the_option_and_the_fields(
        pytester: pytest.Pytester, plan: str, said: str) -> None:
    pytester.makepyfile(test_inner="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                           f"--envtest-pod-plan={plan}", timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = result.stderr.str()
    assert f"--envtest-pod-plan {plan!r}" in error and said in error, error
