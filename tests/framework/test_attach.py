"""A session attached to a running control plane (``--envtest-attach``, ``ENVTEST_ATTACH``).

A plane of the test's own is shared (``ControlPlane.share()``) and an inner pytest session
attaches to it: its tests count their calls, add users under RBAC and put an operator
behind a fault proxy as on a plane of their own; a test that asks for another cluster (a
plane of its own) still gets one; the plane outlives the session, which leaves nothing
behind; bad folders are one line naming the fix.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

import envtest

pytest_plugins = ["pytester"]

INNER = textwrap.dedent('''
    import os
    import kubernetes
    import pytest
    import envtest

    SHARED = os.environ["SHARED_SERVER"]


    def test_counts_only_its_own_calls(envtest, k8s, namespace, api_calls):
        assert envtest.server == SHARED
        with open(os.environ["USERS_DIR_FILE"], "w") as file:  # removed when it stops
            file.write(str(envtest.workdir))
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "mine"}})
        assert api_calls.count(verb="create", resource="configmaps") == 1
        # The audit log is read from the moment of attaching: the owner's earlier write
        # is not in it.
        names = {c.name for c in envtest.audit_log.calls(verb="create",
                                                         resource="configmaps")}
        assert "before-the-session" not in names and "mine" in names, names


    def test_users_are_judged_by_rbac(envtest, namespace):
        alice = envtest.add_user("alice")
        core = kubernetes.client.CoreV1Api(alice.api_client())
        with pytest.raises(kubernetes.client.ApiException) as refused:
            core.list_namespaced_config_map(namespace)
        assert refused.value.status == 403


    def test_an_operator_behind_a_fault_proxy(k8s, namespace, faults, run_operator,
                                              api_calls):
        faults.error(code=500, verb="create", resource="configmaps", times=1)

        def operator(api_client, stop):
            core = kubernetes.client.CoreV1Api(api_client)
            while not stop.is_set():
                try:
                    core.create_namespaced_config_map(namespace, {"metadata": {"name": "op"}})
                    break
                except kubernetes.client.ApiException as exc:
                    if exc.status != 500:
                        raise
            stop.wait()

        handle = run_operator(operator)
        envtest.eventually(lambda: k8s.core.read_namespaced_config_map("op", namespace),
                           timeout=10)
        assert api_calls.count(user=handle, verb="create", resource="configmaps",
                               injected=True) == 1


    @pytest.mark.envtest_isolated
    def test_a_plane_of_its_own_is_not_the_shared_one(envtest):
        assert envtest.server != SHARED


    def test_restart_is_the_owners(envtest):
        with pytest.raises(envtest_errors().UnsupportedError, match="another process"):
            envtest.restart("kube-apiserver")


    def envtest_errors():
        import envtest.errors
        return envtest.errors
''')


def test_a_session_attached_to_a_shared_plane_uses_it_and_leaves_it_running(
        own_plane_pytester: Any, make_control_plane: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    plane = make_control_plane()
    folder = plane.share()
    assert (folder / "attach.json").stat().st_mode & 0o777 == 0o600
    assert (folder / "client-ca.key").stat().st_mode & 0o777 == 0o600
    envtest.Clients(plane.api_client()).core.create_namespaced_config_map(
        "default", {"metadata": {"name": "before-the-session"}})
    monkeypatch.setenv("SHARED_SERVER", plane.server)
    users_dir_file = own_plane_pytester.path / "users-dir"
    monkeypatch.setenv("USERS_DIR_FILE", str(users_dir_file))
    own_plane_pytester.makepyfile(test_inner=INNER)
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rA", f"--envtest-attach={folder}", timeout=180)
    result.assert_outcomes(passed=5)
    output = result.stdout.str()
    assert f"cluster used: attached [{folder}]" in output, output
    # The plane outlives the session; the session's users went with it.
    plane.check_alive()
    assert envtest.Clients(plane.api_client()).core.read_namespaced_config_map(
        "before-the-session", "default")
    users_dir = Path(users_dir_file.read_text())
    assert users_dir.name.startswith("pytest-envtest-attached-") and not users_dir.exists()


@pytest.mark.parametrize(("given", "said"), [
    ("{missing}", "does not exist: the control plane that was shared there has stopped"),
    ("{empty}", "holds no control plane to attach to (no attach.json)"),
])
def test_a_folder_with_no_plane_to_attach_to_is_one_line(
        own_plane_pytester: Any, tmp_path: Path, given: str, said: str) -> None:
    (tmp_path / "empty").mkdir()
    folder = given.format(missing=tmp_path / "missing", empty=tmp_path / "empty")
    own_plane_pytester.makepyfile(test_inner="def test_it(k8s):\n    pass\n")
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--envtest-attach={folder}", timeout=120)
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    assert said in output and folder in output, output
    assert "Traceback" not in output, output


def test_attach_is_for_the_local_backend(own_plane_pytester: Any, tmp_path: Path) -> None:
    own_plane_pytester.makepyfile(test_inner="def test_it():\n    pass\n")
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--envtest-backend=existing",
        f"--envtest-attach={tmp_path}", timeout=60)
    assert result.ret != 0
    assert "is for the local backend, not existing" in result.stderr.str(), \
        result.stderr.str()
