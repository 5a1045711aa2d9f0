"""A CI failure reproduced in one command: every failed test's artifacts hold a snapshot of its
objects, ``envtest up --restore`` brings them back on a new control plane (the Pod engine
moving them on again), and a kept cluster keeps moving until ``envtest down``.

Inner pytest sessions (pytester, in a subprocess) are the CI run; ``envtest up`` runs as the
developer runs it, a process of its own stopped with Ctrl-C.
"""

from __future__ import annotations

import base64
import ctypes
import datetime as dt
import json
import os
import re
import secrets
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import kubernetes
import psutil
import pytest
from framework_helpers import LineReader, assert_gone, survivors

import envtest

pytest_plugins = ["pytester"]
ENVTEST_CLI = Path(sys.executable).parent / "envtest"
SECRET_VALUE = f"s3cret-{secrets.token_hex(12)}"
B64_DECOY = f"b64-{secrets.token_hex(12)}"
LAST_DECOY = f"last-{secrets.token_hex(12)}"
DECOYS = (SECRET_VALUE, B64_DECOY, LAST_DECOY)


def _forms(value: str) -> list[str]:
    """A decoy as a file may carry it: plain, base64 (as ``data`` serves it)."""
    return [value, base64.b64encode(value.encode()).decode()]


def _leaks(folder: Path) -> list[str]:
    """Every file under ``folder`` that holds a decoy in any form, with the form."""
    return [f"{path}: {form}" for path in folder.rglob("*") if path.is_file()
            for value in DECOYS for form in _forms(value) if form.encode() in path.read_bytes()]

INNER = textwrap.dedent('''
    import json

    import pytest
    from envtest import PodPlan, eventually

    LAST = "kubectl.kubernetes.io/last-applied-configuration"

    def crd(kind, scope):
        plural = kind.lower() + "s"
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.snap.example.com"},
                "spec": {"group": "snap.example.com", "scope": scope,
                         "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                         "versions": [{"name": "v1", "served": True, "storage": True,
                                       "subresources": {"status": {}},
                                       "schema": {"openAPIV3Schema": {
                                           "type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}}}]}}

    @pytest.fixture
    def bucket_system(k8s, namespace):
        """A namespace of the operator's own, as a fixture makes it (not the test's)."""
        name = "bucket-system-" + namespace[-5:]
        k8s.core.create_namespace({"metadata": {"name": name}})
        k8s.core.create_namespaced_config_map(name, {"metadata": {"name": "settings"},
                                                     "data": {"region": "eu"}})
        yield name
        k8s.core.delete_namespace(name)

    @pytest.mark.envtest_profile("cluster")
    def test_fails_with_pods_held_pending(install_crds, apply, k8s, namespace, kubelet,
                                          bucket_system):
        install_crds(crd("Gizmo", "Namespaced"), crd("Knob", "Cluster"))
        kubelet.plan("app=web", PodPlan(running_after=3600))  # held Pending here
        apply({"apiVersion": "snap.example.com/v1", "kind": "Knob",
               "metadata": {"name": namespace}, "spec": {"turned": True}})
        [gizmo] = apply({"apiVersion": "snap.example.com/v1", "kind": "Gizmo",
                         "metadata": {"name": "g"}, "spec": {"size": 2}})
        k8s.custom.patch_namespaced_custom_object_status(
            "snap.example.com", "v1", namespace, "gizmos", "g", {"status": {"phase": "Stuck"}})
        apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "child", "ownerReferences": [{"apiVersion": "snap.example.com/v1",
                                                  "kind": "Gizmo", "name": "g",
                                                  "uid": gizmo.metadata.uid}]}})
        # The decoy by every route: plain, as base64 data, in kubectl's last-applied
        # annotation, copied into a ConfigMap and into a Pod template's env.
        apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
               "stringData": {"password": "SECRET_VALUE"}})
        apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "same"},
               "stringData": {"also": "SECRET_VALUE"}})
        k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": "by-client"},
                                          "data": {"token": "B64_VALUE"}})
        manifest = {"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "by-kubectl", "namespace": namespace},
                    "stringData": {"key": "LAST_VALUE"}}
        k8s.core.create_namespaced_secret(namespace, {"metadata": {
            "name": "by-kubectl", "annotations": {LAST: json.dumps(manifest)}},
            "stringData": {"key": "LAST_VALUE"}})
        k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": "pull"},
            "type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson":
                json.dumps({"auths": {"registry.example": {"auth": "LAST_VALUE"}}})}})
        apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "copied"},
               "data": {"url": "postgres://app:SECRET_VALUE@db:5432/app"}})
        apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{
                                         "name": "c", "image": "nginx",
                                         "env": [{"name": "PASSWORD",
                                                  "value": "SECRET_VALUE"}]}]}}}})
        eventually(lambda: len([p for p in k8s.core.list_namespaced_pod(namespace).items
                                if p.spec.node_name]) == 2, timeout=30)
        print("FAILED_NS", namespace, "GIZMO_UID", gizmo.metadata.uid, "EXTRA_NS", bucket_system)
        assert False, "the Pods never came up"
''').replace("SECRET_VALUE", SECRET_VALUE).replace(
    "B64_VALUE", base64.b64encode(B64_DECOY.encode()).decode()).replace("LAST_VALUE", LAST_DECOY)


def _reset_signals() -> None:
    """``envtest up`` is stopped by SIGINT/SIGTERM: not ignored, whatever this run inherited."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _up(*args: str, env: dict[str, str] | None = None,
        unprivileged: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen([str(ENVTEST_CLI), "up", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=_unprivileged if unprivileged else _reset_signals,
                            env={**os.environ, "COLUMNS": "400", **(env or {})})


def _unprivileged() -> None:
    """In the child: a chmod stops it even as root (which CI runners often are), by dropping
    the capabilities that override file permissions from what its exec may hold."""
    _reset_signals()
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _leftovers(pid: int) -> tuple[list[psutil.Process], list[Path]]:
    """Processes and working directories an ``envtest up`` of pid ``pid`` left behind."""
    marker = f"pytest-envtest-cp-{pid}-"
    processes = []
    for process in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in process.info["cmdline"] or ()):
            processes.append(process)
    return survivors(processes), sorted(Path(tempfile.gettempdir()).glob(f"{marker}*"))


def _end(up: subprocess.Popen[str]) -> None:
    """Stop an ``envtest up`` still running as Ctrl-C would, then by force, with whatever
    it left: the end of a test that expected it to refuse and exit."""
    if up.poll() is None:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=30)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
    for process in _leftovers(up.pid)[0]:
        process.kill()


def _stop(up: subprocess.Popen[str], reader: LineReader, children: list[psutil.Process]) -> None:
    up.send_signal(signal.SIGINT)
    assert up.wait(timeout=60) == 0
    assert "stopped; nothing left running" in reader.rest()
    assert_gone(children, timeout=5.0, what="envtest up's children after Ctrl-C")


def test_a_failed_tests_snapshot_restores_on_a_new_plane_and_its_pods_move_on(
        inner_pytester: Any, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    inner_pytester.makepyfile(test_ci=INNER)
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-s", "--envtest-seed", "7",
        "--envtest-artifacts", str(artifacts), timeout=300)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    match = re.search(r"FAILED_NS (\S+) GIZMO_UID (\S+) EXTRA_NS (\S+)", output)
    assert match, output[-3000:]
    namespace, old_gizmo_uid, extra = match.groups()
    restore_line = re.search(r"restore it with: envtest up --restore (\S+)", output)
    assert restore_line, output[-3000:]
    folder = Path(restore_line.group(1))

    # The snapshot: where the failure's artifacts are, private, saying what it holds.
    assert folder.parent.parent == artifacts and folder.name == "snapshot"
    assert _mode(folder) == 0o700
    for name in ("manifest.json", "objects.json"):
        assert _mode(folder / name) == 0o600, name
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["format"] == 1
    assert manifest["kubernetes_version"].startswith(os.environ.get("ENVTEST_K8S_VERSION",
                                                                     "1.37"))
    assert (manifest["profile"], manifest["nodes"], manifest["seed"]) == ("cluster", 3, 7)
    assert "deployment-controller" in manifest["controllers"]
    assert manifest["test"] == "test_ci.py::test_fails_with_pods_held_pending"
    # The test's namespace, and the one its fixture made (it held only the test's before).
    assert manifest["namespaces"] == [namespace, extra]
    assert {"gizmos.snap.example.com", "knobs.snap.example.com"} <= set(manifest["crds"])
    taken = dt.datetime.fromisoformat(manifest["taken"])
    assert abs((dt.datetime.now(dt.UTC) - taken).total_seconds()) < 600
    items = json.loads((folder / "objects.json").read_text())["items"]
    assert manifest["objects"] == len(items)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in items}
    assert {("Namespace", namespace), ("Knob", namespace), ("Gizmo", "g"),
            ("Deployment", "web"), ("Secret", "creds"), ("Namespace", extra),
            ("ConfigMap", "settings")} <= kinds

    # No decoy in any form in any file, the snapshot included: artifacts get uploaded.
    files = [p for p in artifacts.rglob("*") if p.is_file()]
    assert len(files) >= 6, files  # the report's sections, the timeline, the logs, snapshot
    assert not _leaks(artifacts), "a Secret value in the artifacts"
    assert "no Secret value: " in output and "replaced by placeholders" in output, output
    # The manifest says what holds a placeholder, field by field.
    assert manifest["secrets"] == "placeholders"
    replaced = manifest["replaced"]
    assert replaced[f"Secret {namespace}/creds"] == ["data.password"]
    assert replaced[f"Secret {namespace}/by-client"] == ["data.token"]
    assert replaced[f"ConfigMap {namespace}/copied"] == ["data.url"]
    assert replaced[f"Deployment {namespace}/web"] == [
        "spec.template.spec.containers[0].env[0].value"]
    kubectl = replaced[f"Secret {namespace}/by-kubectl"]
    assert kubectl[0] == "data.key" and "stringData.key" in kubectl[1], kubectl
    assert any(name.startswith(f"Pod {namespace}/web-") for name in replaced), replaced
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in items}
    marker = base64.b64decode(by_name["Secret", "creds"]["data"]["password"]).decode()
    assert re.fullmatch(r"<redacted [0-9a-f]{12}>", marker), marker
    assert by_name["Secret", "same"]["data"]["also"] == \
        by_name["Secret", "creds"]["data"]["password"], "one value, one marker"
    applied = json.loads(by_name["Secret", "by-kubectl"]["metadata"]["annotations"][
        "kubectl.kubernetes.io/last-applied-configuration"])  # still JSON for kubectl apply
    assert re.fullmatch(r"<redacted [0-9a-f]{12}>", applied["stringData"]["key"]), applied

    # The restore: a new plane, the failed state as it was, the engine moving it on.
    kubeconfig = tmp_path / "restored.kubeconfig"
    started = time.monotonic()
    up = _up("--restore", str(folder), "--kubeconfig-out", str(kubeconfig))
    children: list[psutil.Process] = []
    try:
        reader = LineReader(up)
        reader.wait_for("Press Ctrl-C", timeout=180)
        restore_seconds = time.monotonic() - started
        children = list(psutil.Process(up.pid).children(recursive=True))
        assert sorted(c.name() for c in children) == [
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        restored = next(line for line in reader.lines if line.startswith("restored "))
        assert "problems" not in restored, reader.lines
        # What the snapshot held and the restore left out is named, with why.
        assert f"ConfigMap {namespace}/kube-root-ca.crt" in restored, restored
        assert "left out (" in restored and "makes its own" in restored, restored
        assert any("(seed 7)" in line for line in reader.lines), reader.lines
        api = envtest.api_client_from_kubeconfig(kubeconfig)
        try:
            custom = kubernetes.client.CustomObjectsApi(api)
            core = kubernetes.client.CoreV1Api(api)
            gizmo = custom.get_namespaced_custom_object("snap.example.com", "v1", namespace,
                                                        "gizmos", "g")
            assert gizmo["status"] == {"phase": "Stuck"}, "the status, through /status"
            assert gizmo["metadata"]["uid"] != old_gizmo_uid
            child = core.read_namespaced_config_map("child", namespace)
            assert [r.uid for r in child.metadata.owner_references] == [gizmo["metadata"]["uid"]]
            # What an operator reads at its start is there: its namespace and settings.
            assert core.read_namespaced_config_map("settings", extra).data == {"region": "eu"}
            knob = custom.get_cluster_custom_object("snap.example.com", "v1", "knobs",
                                                    namespace)
            assert knob["spec"] == {"turned": True}
            secret = core.read_namespaced_secret("creds", namespace)  # with its placeholder
            assert base64.b64decode(secret.data["password"]).decode() == marker
            pull = core.read_namespaced_secret("pull", namespace)  # validated: JSON inside
            assert "<redacted " in base64.b64decode(pull.data[".dockerconfigjson"]).decode()
            said = next(line for line in reader.lines if line.startswith("Secret values:"))
            count = sum(len(fields) for fields in replaced.values())
            assert f"Secret values: {count} values were replaced by placeholders" in said, said
            assert "an operator that reads them gets placeholders" in said, said
            [replica_set] = kubernetes.client.AppsV1Api(api).list_namespaced_replica_set(
                namespace).items
            pods = core.list_namespaced_pod(namespace).items
            snapshot_pods = sorted(n for k, n in kinds if k == "Pod")
            assert sorted(p.metadata.name for p in pods) == snapshot_pods
            assert all([r.uid for r in p.metadata.owner_references] == [replica_set.metadata.uid]
                       for p in pods), "owners restored before their dependents, uids mapped"
            for name in snapshot_pods:  # held Pending there; the engine here runs them
                envtest.wait_for(api, "Pod", name, envtest.pod_is_ready, namespace=namespace,
                                 timeout=30)
            assert sorted(p.metadata.name for p in core.list_namespaced_pod(namespace).items) \
                == snapshot_pods, "the ReplicaSet adopted the restored Pods, made no others"
        finally:
            api.close()
        print(f"snapshot: {len(items)} objects, "
              f"{(folder / 'objects.json').stat().st_size} bytes; restore to ready with "
              f"objects: {restore_seconds:.1f} s; {restored}")
        _stop(up, reader, children)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        for child_process in survivors(children):
            child_process.kill()


def _snapshot(folder: Path, **manifest: Any) -> Path:
    folder.mkdir(parents=True)
    values = {"format": 1, "kubernetes_version": "1.37.2", "profile": "minimal",
              "controllers": [], "nodes": 0, "seed": 0, "test": "t.py::t", "namespaces": [],
              "crds": [], "objects": 0, "taken": "2026-01-01T00:00:00+00:00", **manifest}
    (folder / "manifest.json").write_text(json.dumps(values))
    (folder / "objects.json").write_text(json.dumps({"kind": "List", "items": []}))
    return folder


@pytest.mark.parametrize("case", ["newer format", "missing file", "not a snapshot",
                                  "version not to be had", "unreadable", "unreadable file"])
def test_a_bad_snapshot_is_an_error_naming_the_fix_and_starts_nothing(
        case: str, tmp_path: Path) -> None:
    folder = tmp_path / "snapshot"
    expected: tuple[str, ...]
    if case == "newer format":
        _snapshot(folder, format=2)
        expected = ("format 2", "reads format 1", "upgrade pytest-envtest")
    elif case == "missing file":
        _snapshot(folder)
        (folder / "objects.json").unlink()
        expected = ("objects.json is missing", "download the whole snapshot folder again")
    elif case == "not a snapshot":
        folder.mkdir()
        (folder / "notes.txt").write_text("hello")
        expected = ("is not a snapshot", "manifest.json", "give the snapshot folder")
    elif case == "unreadable":
        # Root reads any folder: the CLI then runs without the capabilities for it.
        _snapshot(folder)
        folder.chmod(0)
        expected = ("cannot read", "Permission denied", "chmod -R u+rX", str(folder))
    elif case == "unreadable file":
        _snapshot(folder)
        (folder / "objects.json").unlink()
        (folder / "objects.json").mkdir()  # an OSError even root meets
        expected = ("cannot read", "objects.json", "Is a directory")
    else:
        _snapshot(folder, kubernetes_version="1.19.99")
        expected = ("taken on Kubernetes 1.19.99", "cannot be had here",
                    "envtest use 1.19.99")
    up = _up("--restore", str(folder), "--kubeconfig-out", str(tmp_path / "kubeconfig"),
             env={"ENVTEST_INSTALLED_ONLY": "1"}, unprivileged=case == "unreadable")
    try:
        output, _ = up.communicate(timeout=120)
    finally:
        _end(up)  # a refusal that did not come leaves a plane running: never past the test
    assert "Traceback" not in output, output
    assert up.returncode == 1, output
    flat = " ".join(output.split())
    assert "envtest: error:" in flat
    for words in expected:
        assert words in flat, (words, output)
    processes, dirs = _leftovers(up.pid)
    assert not processes and not dirs, (processes, dirs)
    assert not (tmp_path / "kubeconfig").exists()


KEPT = textwrap.dedent('''
    import pytest

    @pytest.mark.envtest_profile("cluster")
    def test_fails_on_the_cluster_profile(k8s, namespace):
        print("FAILED_NS", namespace)
        assert False, "fail on purpose"
''')


def _lease_renewed(api: kubernetes.client.ApiClient, node: str, after: dt.datetime) -> bool:
    lease = kubernetes.client.CoordinationV1Api(api).read_namespaced_lease(node,
                                                                           "kube-node-lease")
    return bool(lease.spec.renew_time and lease.spec.renew_time > after)


def test_a_kept_cluster_keeps_moving_until_envtest_down(inner_pytester: Any) -> None:
    inner_pytester.makepyfile(test_kept=KEPT)
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-s", "--envtest-keep=failed",
        "--envtest-pod-plan=running_after=0.5,ready_after=0.5", timeout=300)
    ended = dt.datetime.now(dt.UTC)
    output = result.stdout.str()
    workdir_match = re.search(r"stop it with: envtest down (\S+)", output)
    assert workdir_match, output[-3000:]
    workdir = workdir_match.group(1)
    pids: list[int] = []
    try:
        result.assert_outcomes(failed=1)
        assert re.search(r"simulated Nodes and the Pod lifecycle engine keep running "
                         r"\(pid \d+", output), output[-3000:]
        namespace = re.search(r"FAILED_NS (\S+)", output).group(1)  # type: ignore[union-attr]
        kubeconfig = re.search(r"export KUBECONFIG=(\S+)", output).group(1)  # type: ignore[union-attr]
        state = json.loads((Path(workdir) / "detached.json").read_text())
        pids = list(state["pids"].values())
        keeper = psutil.Process(state["pids"]["keeper"])
        assert keeper.is_running() and "keeper" in keeper.cmdline()
        api = envtest.api_client_from_kubeconfig(kubeconfig)
        try:
            core = kubernetes.client.CoreV1Api(api)
            # The heartbeats go on after the session that started them ended ...
            nodes = [n.metadata.name for n in core.list_node().items]
            assert sorted(nodes) == ["envtest-node-0", "envtest-node-1", "envtest-node-2"]
            envtest.eventually(lambda: all(_lease_renewed(api, n, ended) for n in nodes),
                               timeout=30, message="the kept Nodes' Leases renewed")
            for node in core.list_node().items:
                ready = [c for c in node.status.conditions if c.type == "Ready"]
                assert ready and ready[0].status == "True", node.metadata.name
            # ... and a Pod made now is scheduled and moved to Running by the engine, which
            # follows the session's plan still (Pending 0.5 s, Running not Ready 0.5 s).
            envtest.wait_for_service_account(api, namespace)
            created = time.monotonic()
            core.create_namespaced_pod(namespace, {
                "metadata": {"name": "after"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
            pod = envtest.wait_for(api, "Pod", "after", envtest.pod_is_ready,
                                   namespace=namespace, timeout=30)
            assert time.monotonic() - created >= 0.95
            assert pod.spec.nodeName in nodes
            # The keeper serves the Nodes' kubelet API too: kubectl logs works on it.
            assert core.read_namespaced_pod_log("after", namespace) == "started\nready\n"
        finally:
            api.close()
    finally:
        down = subprocess.run([str(ENVTEST_CLI), "down", workdir], capture_output=True,
                              text=True, timeout=90, check=False)
    assert down.returncode == 0, down.stderr
    assert not Path(workdir).exists()
    assert pids and len(pids) == 5, pids  # etcd, apiserver, controller manager, scheduler, keeper
    envtest.eventually(lambda: not [p for p in pids if psutil.pid_exists(p)
                                    and psutil.Process(p).status() != psutil.STATUS_ZOMBIE],
                       timeout=15, message="processes left running after envtest down")


KEEP = textwrap.dedent('''
    def test_fails_with_a_secret(k8s, namespace):
        k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": "creds"},
                                                      "stringData": {"password": "KEEP_VALUE"}})
        print("FAILED_NS", namespace)
        assert False, "fail on purpose"
''')


def test_keep_mode_round_trips_the_values_in_red_and_a_recorded_session_writes_none(
        inner_pytester: Any, tmp_path: Path) -> None:
    """``envtest_snapshot_secrets = keep`` (the ini option) writes the values in clear and
    says so in red; the restore brings them back; ``envtest up --record`` of that session
    writes no Secret value, neither the restored one nor one made by hand meanwhile."""
    kept = f"kept-{secrets.token_hex(12)}"
    inner_pytester.makeini("[pytest]\nenvtest_snapshot_secrets = keep\n")
    inner_pytester.makepyfile(test_keep=KEEP.replace("KEEP_VALUE", kept))
    artifacts = tmp_path / "artifacts"
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-s", "--color=yes", "--envtest-artifacts", str(artifacts),
        timeout=300)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    namespace = re.search(r"FAILED_NS (\S+)", output).group(1)  # type: ignore[union-attr]
    red = "\x1b[31;1m"
    assert re.search(re.escape(red) + r"\S+snapshot \(taken in [\d.]+ s; Secret values IN "
                     r"CLEAR \(--envtest-snapshot-secrets=keep\): do not upload this folder\)",
                     output), output[-3000:]
    assert re.search(r"\x1b\[31m\x1b\[1menvtest: the failed tests' snapshots hold Secret "
                     r"values IN CLEAR", output) or "\x1b[1m\x1b[31menvtest: the failed" in \
        output, output[-2000:]
    [folder] = [p.parent for p in artifacts.rglob("objects.json")]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (manifest["secrets"], manifest["replaced"]) == ("in clear", {})
    assert _mode(folder / "objects.json") == 0o600
    assert base64.b64encode(kept.encode()).decode() in (folder / "objects.json").read_text()

    record = tmp_path / "record"
    kubeconfig = tmp_path / "restored.kubeconfig"
    up = _up("--restore", str(folder), "--record", str(record), "--kubeconfig-out",
             str(kubeconfig), "--controllers", "none")
    children: list[psutil.Process] = []
    try:
        reader = LineReader(up)
        reader.wait_for("Press Ctrl-C", timeout=120)
        children = list(psutil.Process(up.pid).children(recursive=True))
        said = next(line for line in reader.lines if line.startswith("Secret values:"))
        assert "restored in clear" in said, said
        by_hand = f"byhand-{secrets.token_hex(12)}"
        api = envtest.api_client_from_kubeconfig(kubeconfig)
        try:
            core = kubernetes.client.CoreV1Api(api)
            secret = core.read_namespaced_secret("creds", namespace)
            assert base64.b64decode(secret.data["password"]).decode() == kept, "round trip"
            core.create_namespaced_secret("default", {"metadata": {"name": "by-hand"},
                                                      "stringData": {"token": by_hand}})
            core.create_namespaced_config_map("default", {"metadata": {"name": "note"},
                                                          "data": {"copy": f"t={by_hand}"}})
            core.patch_namespaced_secret("creds", namespace,
                                         {"stringData": {"password": kept + "-rotated"}})
        finally:
            api.close()
        _stop(up, reader, children)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    [report] = record.glob("envtest-up-*.html")
    text = report.read_text()
    assert "by-hand" in text and "note" in text, "the session's writes are in the report"
    for value in (kept, kept + "-rotated", by_hand):
        for form in _forms(value):
            assert form not in text, f"{form} in {report}"
