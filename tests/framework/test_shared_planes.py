"""``--envtest-share-planes``: the xdist workers run their tests on one plane per kind, which
the controller starts, restarts a component of for a CRD change, and replaces when it dies;
a worker's death leaves it running, and ``envtest_private`` keeps a worker's own.

What the inner tests saw (servers, the kube-apiserver's pid from the plane's own folder)
is checked against the plugin's summary and against the processes themselves."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

RECORD = textwrap.dedent("""
    import json
    import os
    from pathlib import Path

    RECORDS = Path(__file__).parent / "records"


    def record(name, envtest, **more):
        RECORDS.mkdir(exist_ok=True)
        pids = getattr(envtest, "attachment", None)
        (RECORDS / f"{name}.json").write_text(json.dumps({
            "worker": os.environ.get("PYTEST_XDIST_WORKER"), "server": envtest.server,
            "kind": type(envtest).__name__,
            "apiserver": (pids.pids if pids else envtest.pids)["kube-apiserver"], **more}))
""")

SHARING = RECORD + textwrap.dedent("""
    import pytest
    from envtest import UnsupportedError


    @pytest.mark.parametrize("index", range(6))
    def test_shared(index, envtest, k8s, namespace, request):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "mine"}})
        names = [c.metadata.name for c in k8s.core.list_namespaced_config_map(namespace).items]
        assert "mine" in names
        record(f"shared-{index}", envtest,
               socket=request.config.workerinput["envtest_shared_planes"])


    def test_a_whole_plane_fault_is_refused_with_the_way_out(envtest):
        with pytest.raises(UnsupportedError, match="envtest_private"):
            envtest.restart("kube-apiserver")


    @pytest.mark.envtest_private
    def test_private(envtest):
        record("private", envtest)
""")


def records(directory: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text())
            for p in sorted((directory / "records").glob("*.json"))}


def gone(pid: int) -> bool:
    import psutil
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_workers_share_one_plane_and_a_private_test_gets_its_workers_own(
        own_plane_pytester: pytest.Pytester, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    own_plane_pytester.makepyfile(test_inner=SHARING)
    folders = tmp_path / "tmp"
    folders.mkdir()
    monkeypatch.setenv("TMPDIR", str(folders))
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2", "--envtest-share-planes",
        timeout=240)
    result.assert_outcomes(passed=8)
    seen = records(own_plane_pytester.path)
    shared = [r for name, r in seen.items() if name.startswith("shared-")]
    assert len(shared) == 6
    assert {r["worker"] for r in shared} == {"gw0", "gw1"}
    assert {r["kind"] for r in shared} == {"SharedPlane"}
    assert len({r["server"] for r in shared}) == 1  # both workers, one plane...
    assert len({r["apiserver"] for r in shared}) == 1  # ...one kube-apiserver
    assert seen["private"]["server"] != shared[0]["server"]
    assert seen["private"]["kind"] == "ControlPlane"
    output = result.stdout.str()
    # The controller says it started one plane and shared it; no worker started it again.
    assert output.count("shared by the xdist workers") == 1, output
    assert output.count("(started in") == 2, output  # the shared one, and the private one
    assert gone(shared[0]["apiserver"]) and gone(seen["private"]["apiserver"])
    assert not Path(shared[0]["socket"]).parent.exists()  # the socket's folder, removed


WORKER_DEATH = RECORD + textwrap.dedent("""
    import os


    def test_1_before(envtest):
        record("before", envtest)


    def test_2_its_worker_dies(envtest):
        os._exit(3)


    def test_3_after_the_worker(envtest):
        record("after-worker", envtest)
""")

PLANE_DEATH = RECORD + textwrap.dedent("""
    import os
    import signal

    from envtest import eventually


    def test_1_the_plane_dies(envtest, k8s):
        record("before", envtest)
        os.kill(envtest.attachment.pids["kube-apiserver"], signal.SIGKILL)
        eventually(lambda: k8s.core.list_namespace() and False, timeout=60)


    def test_2_after_the_plane(envtest, k8s, namespace):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "again"}})
        record("after-plane", envtest)
""")


def run_one_worker(pytester: pytest.Pytester, suite: str) -> Any:
    pytester.makepyfile(test_inner=suite)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-n",
                                         "1", "--envtest-share-planes", timeout=240)


def test_a_workers_death_leaves_the_shared_plane_to_its_replacement(
        own_plane_pytester: pytest.Pytester) -> None:
    result = run_one_worker(own_plane_pytester, WORKER_DEATH)
    result.assert_outcomes(passed=2, failed=1)
    assert "worker 'gw0' crashed while running 'test_inner.py::test_2_its_worker_dies'" \
        in result.stdout.str()
    seen = records(own_plane_pytester.path)
    assert seen["before"]["worker"] != seen["after-worker"]["worker"]  # a new worker...
    assert seen["after-worker"]["server"] == seen["before"]["server"]  # ...same plane
    assert seen["after-worker"]["apiserver"] == seen["before"]["apiserver"]
    assert gone(seen["before"]["apiserver"])  # stopped at the end all the same


def test_a_shared_plane_that_dies_fails_its_test_in_a_line_and_is_replaced(
        own_plane_pytester: pytest.Pytester) -> None:
    result = run_one_worker(own_plane_pytester, PLANE_DEATH)
    result.assert_outcomes(passed=1, failed=1)
    seen = records(own_plane_pytester.path)
    assert seen["after-plane"]["server"] != seen["before"]["server"]  # replaced
    output = result.stdout.str()
    died = [line for line in output.splitlines() if line.startswith("E   ")
            and "control plane shared by the xdist workers" in line]
    assert died and "kube-apiserver exited with code -9" in died[0], output
    assert gone(seen["after-plane"]["apiserver"])


CRDS = textwrap.dedent("""
    import pytest
    from envtest import eventually

    pytestmark = pytest.mark.envtest_profile("cluster")


    def crd(group):
        return {{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {{"name": f"things.{{group}}"}},
                "spec": {{"group": group, "scope": "Namespaced",
                         "names": {{"plural": "things", "singular": "thing", "kind": "Thing"}},
                         "versions": [{{"name": "v1", "served": True, "storage": True,
                                       "schema": {{"openAPIV3Schema": {{
                                           "type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}}}}}}]}}}}


    @pytest.mark.parametrize("group", {groups!r})
    def test_the_garbage_collector_knows_a_new_kind(group, install_crds, k8s, apply,
                                                   namespace):
        install_crds(crd(group))
        owner = apply({{"apiVersion": f"{{group}}/v1", "kind": "Thing",
                       "metadata": {{"name": "owner"}}}})[0]
        apply({{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{
            "name": "owned", "ownerReferences": [{{
                "apiVersion": f"{{group}}/v1", "kind": "Thing", "name": "owner",
                "uid": owner["metadata"]["uid"]}}]}}}})
        k8s.custom.delete_namespaced_custom_object(group, "v1", namespace, "things", "owner")

        def owned_gone():
            return not k8s.core.list_namespaced_config_map(
                namespace, field_selector="metadata.name=owned").items
        eventually(owned_gone, timeout=20)
""")


def test_a_crd_change_restarts_the_shared_controller_manager_for_every_worker(
        own_plane_pytester: pytest.Pytester) -> None:
    groups = ["one.example.com", "two.example.com", "three.example.com", "four.example.com"]
    own_plane_pytester.makepyfile(test_inner=CRDS.format(groups=groups))
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2", "--envtest-share-planes",
        timeout=300)
    result.assert_outcomes(passed=4)
    assert result.stdout.str().count("(started in") == 1


HOLDS = textwrap.dedent("""
    import json
    import os
    import time
    from pathlib import Path


    def test_holds_the_shared_plane(envtest, request):
        Path(os.environ["SHARED_PLANE_FILE"]).write_text(json.dumps({
            "pids": list(envtest.attachment.pids.values()),
            "socket": request.config.workerinput["envtest_shared_planes"]}))
        time.sleep(300)  # until the run is interrupted
""")


def _signals_by_default() -> None:
    """In the inner run: SIGINT and SIGTERM as a terminal's, whatever the runner ignores."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_an_interrupted_run_stops_its_shared_plane(own_plane_pytester: pytest.Pytester,
                                                   tmp_path: Path, how: str) -> None:
    """Ctrl-C (SIGINT to the terminal's process group) and SIGTERM to the controller alike:
    the shared plane's processes and its socket's folder are gone once the run has ended."""
    import os
    import signal
    import subprocess
    import sys

    from envtest import eventually

    own_plane_pytester.makepyfile(test_inner=HOLDS)
    told = tmp_path / "plane.json"
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1",
         "--envtest-share-planes", "test_inner.py"], cwd=own_plane_pytester.path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "SHARED_PLANE_FILE": str(told)}, preexec_fn=_signals_by_default)
    try:
        plane = eventually(lambda: told.exists() and json.loads(told.read_text()), timeout=120)
        if how == "SIGINT":
            os.killpg(inner.pid, signal.SIGINT)
        else:
            inner.send_signal(signal.SIGTERM)
        inner.wait(timeout=90)
    finally:
        if inner.poll() is None:
            os.killpg(inner.pid, signal.SIGKILL)
            inner.wait()
    eventually(lambda: all(gone(pid) for pid in plane["pids"]), timeout=30)
    assert not Path(plane["socket"]).parent.exists()


FAILS = textwrap.dedent("""
    def test_fails_leaving_evidence(k8s, namespace):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "evidence"}})
        assert False, "fail on purpose"
""")


def test_keep_failed_keeps_the_shared_plane_a_worker_failed_on(
        own_plane_pytester: pytest.Pytester) -> None:
    """The test fails on a worker, the controller owns the plane: told, it keeps it, and
    the failed test's namespace with it."""
    import re
    import subprocess
    import sys

    own_plane_pytester.makepyfile(test_inner=FAILS)
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "1", "--envtest-share-planes",
        "--envtest-keep=failed", timeout=240)
    output = result.stdout.str()
    kept = re.search(r"stop it with: envtest down (\S+)", output)
    assert kept, output[-3000:]
    try:
        result.assert_outcomes(failed=1)
        failed_ns = re.search(r"objects in namespace (\S+)", output).group(1)  # type: ignore[union-attr]
        assert f"namespaces of failed tests, kept: {failed_ns}" in output
        state = (Path(kept.group(1)) / "detached.json").read_text()
        pids = [int(p) for p in re.findall(r'": (\d+)', state)]
        assert pids and not any(gone(pid) for pid in pids)
    finally:
        subprocess.run([str(Path(sys.executable).parent / "envtest"), "down", kept.group(1)],
                       capture_output=True, timeout=60, check=True)
