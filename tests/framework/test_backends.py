"""Backends and versions: the same tests on local binaries, an existing cluster, k3s or kind.

The Docker backends cannot run without a Docker engine; everything of theirs
that needs no engine is tested here (image choice per version, options,
skips naming the missing engine), and the rest skips with that reason.  The
``existing`` backend is proven against a control plane this test starts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from envtest import (
    SUPPORTED_MINORS,
    BackendUnavailable,
    ControlPlane,
    K3sCluster,
    KindCluster,
    Version,
    docker_engine_problem,
)
from envtest.binaries import BinaryStore

ROOT = Path(__file__).resolve().parents[2]

INNER_TESTS = textwrap.dedent('''
    import pytest

    def test_uses_the_cluster(envtest, k8s, namespace, kubeconfig):
        names = [n.metadata.name for n in k8s.core.list_namespace().items]
        assert namespace in names
        print("SERVER", envtest.server)

    def test_needs_the_audit_log(api_calls, k8s, namespace):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "counted"}})
        assert api_calls.count(verb="create", resource="configmaps") == 1
''')


def _run_inner(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    return subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_inner.py"),
                           "-q", "-s", "-rs", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_existing_backend_runs_the_same_tests_on_a_running_cluster(tmp_path: Path) -> None:
    with ControlPlane() as outside:
        result = _run_inner(tmp_path, "--envtest-backend=existing",
                            f"--envtest-kubeconfig={outside.kubeconfig_path}")
        assert result.returncode == 0, result.stdout[-3000:]
        assert f"SERVER {outside.server}" in result.stdout
        assert "1 passed, 1 skipped" in result.stdout
        assert "API-call accounting needs the audit log, which the existing backend" in (
            result.stdout)


def test_use_existing_cluster_variable_selects_the_existing_backend(tmp_path: Path,
                                                                   monkeypatch) -> None:
    with ControlPlane() as outside:
        monkeypatch.setenv("USE_EXISTING_CLUSTER", "true")
        monkeypatch.setenv("KUBECONFIG", str(outside.kubeconfig_path))
        result = _run_inner(tmp_path, "-k", "uses_the_cluster")
        assert result.returncode == 0, result.stdout[-3000:]
        assert f"SERVER {outside.server}" in result.stdout


@pytest.mark.parametrize("backend", ["testcontainers", "kind"])
def test_docker_backends_skip_naming_the_missing_engine(tmp_path: Path, backend: str) -> None:
    problem = docker_engine_problem()
    if problem is None:
        pytest.skip("a Docker engine answers here: the skip path cannot be observed")
    result = _run_inner(tmp_path, f"--envtest-backend={backend}")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "2 skipped" in result.stdout
    assert "no Docker engine answers" in result.stdout
    assert "--envtest-backend=local" in result.stdout


def test_unknown_backend_is_a_usage_error(tmp_path: Path) -> None:
    result = _run_inner(tmp_path, "--envtest-backend=minikube")
    assert result.returncode == 4  # pytest's usage-error exit code
    assert "choose one of local, existing, testcontainers, kind" in result.stderr


@pytest.mark.parametrize(("version", "k3s", "kind"), [
    ("1.37", "rancher/k3s:v1.37.2-k3s1", "kindest/node:v1.37.2"),
    ("1.34.4", "rancher/k3s:v1.34.4-k3s1", "kindest/node:v1.34.4"),
    ("v1.36.3", "rancher/k3s:v1.36.3-k3s1", "kindest/node:v1.36.3"),
    (None, "rancher/k3s:v1.37.2-k3s1", "kindest/node:v1.37.2"),
])
def test_images_follow_the_kubernetes_version(version: str | None, k3s: str, kind: str) -> None:
    clusters = [K3sCluster(version), KindCluster(version),
                K3sCluster(version, image="mirror/k3s:custom")]
    try:
        assert [c.image for c in clusters] == [k3s, kind, "mirror/k3s:custom"]
    finally:
        for cluster in clusters:
            cluster.stop()


def test_docker_backends_refuse_to_start_without_an_engine() -> None:
    if docker_engine_problem() is None:
        pytest.skip("a Docker engine answers here")
    for cluster in (K3sCluster("1.37"), KindCluster("1.37", name="envtest-probe")):
        with pytest.raises(BackendUnavailable, match="no Docker engine answers"):
            cluster.start()
        assert not cluster.started
        cluster.stop()


def test_controllers_need_the_local_backend(tmp_path: Path) -> None:
    result = _run_inner(tmp_path, "--envtest-backend=existing",
                        "--envtest-kubeconfig=/nonexistent", "--envtest-controllers=namespace",
                        "-k", "uses_the_cluster")
    assert "only the local backend runs a controller-manager on demand" in result.stdout


# -- versions ------------------------------------------------------------------------------


def _installed(minor: int) -> Version | None:
    versions = [e.version for e in BinaryStore().installed() if e.version.minor == minor]
    return max(versions) if versions else None


OTHER_MINOR = 36


@pytest.mark.skipif(_installed(OTHER_MINOR) is None,
                    reason=f"Kubernetes 1.{OTHER_MINOR} binaries are not built on this machine "
                           f"(`envtest use 1.{OTHER_MINOR}` builds them; `make matrix` does)")
def test_a_version_marker_gets_its_own_control_plane_reused_across_tests(tmp_path: Path) -> None:
    (tmp_path / "test_versions.py").write_text(textwrap.dedent(f'''
        import pytest

        @pytest.mark.k8s_version("1.{OTHER_MINOR}")
        def test_marked(envtest):
            print("MARKED", envtest.version, envtest.server)

        @pytest.mark.k8s_version("1.{OTHER_MINOR}")
        def test_marked_again(envtest):
            print("MARKED", envtest.version, envtest.server)

        @pytest.mark.parametrize("k8s_version", ["1.{OTHER_MINOR}", None])
        def test_parametrized(envtest, k8s_version):
            print("PARAM", k8s_version, envtest.version, envtest.server)
    '''))
    result = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_versions.py"),
                             "-q", "-s", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    lines = [re.search(r"(MARKED|PARAM)\s.*", line).group(0).split()  # type: ignore[union-attr]
             for line in result.stdout.splitlines() if re.search(r"(MARKED|PARAM)\s", line)]
    marked = {tuple(words[1:]) for words in lines if words[0] == "MARKED"}
    assert len(marked) == 1, "both marked tests must share one control plane"
    other_version, other_server = next(iter(marked))
    assert other_version == str(_installed(OTHER_MINOR))
    params = {words[1]: (words[2], words[3]) for words in lines if words[0] == "PARAM"}
    assert params[f"1.{OTHER_MINOR}"] == (other_version, other_server)
    assert params["None"][0] != other_version and params["None"][1] != other_server


def test_a_version_marker_naming_the_default_version_shares_its_control_plane(
        tmp_path: Path, default_binaries_version: Version) -> None:
    """The pool keys clusters on the binaries a spec resolves to, not on the text typed."""
    (tmp_path / "test_same.py").write_text(textwrap.dedent(f'''
        import pytest

        def test_default(envtest):
            print("SERVER default", envtest.server)

        @pytest.mark.k8s_version("{default_binaries_version.minor_str}")
        def test_minor(envtest):
            print("SERVER minor", envtest.server)

        @pytest.mark.parametrize("k8s_version", ["{default_binaries_version.tag}"])
        def test_exact(envtest, k8s_version):
            print("SERVER exact", envtest.server)
    '''))
    result = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_same.py"),
                             "-q", "-s", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "ENVTEST_INSTALLED_ONLY": "1",
                                 "ENVTEST_K8S_VERSION": str(default_binaries_version)})
    assert result.returncode == 0, result.stdout[-3000:]
    servers = dict(re.findall(r"SERVER (\w+) (\S+)", result.stdout))
    assert set(servers) == {"default", "minor", "exact"}
    assert len(set(servers.values())) == 1, f"three specs of one version, one plane: {servers}"


# -- CI for users of the repo -------------------------------------------------------------


def test_the_readme_and_ci_say_what_make_matrix_found() -> None:
    """The versions the README says pass are matrix.json's, all passing; CI runs the operator
    suite on the older minors of that file and the whole suite on the supported ones."""
    rows = json.loads((ROOT / "bench" / "results" / "matrix.json").read_text())
    assert rows and all(r["passed"] > 0 and r["failed"] == 0 for r in rows), rows
    readme = " ".join((ROOT / "README.md").read_text().split())
    claim = re.search(r"the operator suite passes on ([\d., and]+) with the lean defaults",
                      readme)
    assert claim, "the README's make matrix sentence"
    claimed = re.findall(r"1\.\d+\.\d+", claim.group(1))
    assert claimed == [r["patch"] for r in rows]
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    minors = {str(v) for job in ("test", "older-minors")
              for v in workflow["jobs"][job]["strategy"]["matrix"]["k8s"]}
    assert minors == {r["version"] for r in rows}
    older = workflow["jobs"]["older-minors"]
    assert any("make matrix" in str(step.get("run", "")) for step in older["steps"])


def test_ci_workflow_runs_the_version_and_python_matrix() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    test_job = workflow["jobs"]["test"]
    matrix = test_job["strategy"]["matrix"]
    # Every Kubernetes minor the framework supports, and every Python the package claims.
    assert {f"1.{minor}" for minor in SUPPORTED_MINORS} <= {str(v) for v in matrix["k8s"]}
    pyproject = (ROOT / "pyproject.toml").read_text()
    claimed = set(re.findall(r"Programming Language :: Python :: (3\.\d+)", pyproject))
    assert claimed and claimed <= {str(v) for v in matrix["python"]}
    steps = " ".join(str(step) for step in test_job["steps"])
    # The binaries come from this repository's own action, which caches them.
    assert [step for step in test_job["steps"] if step.get("uses") == "./"]
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    cached = [step for step in action["runs"]["steps"] if "actions/cache" in step.get("uses", "")]
    assert cached and "kubebuilder-envtest" in cached[0]["with"]["path"]
    assert "KUBEBUILDER_ASSETS" in str(action["runs"]["steps"])
    assert any("macos" in str(job.get("runs-on")) for job in workflow["jobs"].values())
    assert "make test" in steps and "--envtest-artifacts" in steps  # make test runs on every core
    assert "upload-artifact" in steps and "failure()" in steps
    lint = " ".join(str(step) for step in workflow["jobs"]["lint"]["steps"])
    assert "make lint" in lint
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "uses" in step and step["uses"] != "./":
                ref = step["uses"].split("@", 1)[1]
                assert len(ref) == 40, f"{step['uses']} must be pinned to a commit"


def test_ci_workflow_passes_the_linters() -> None:
    zizmor = Path(sys.executable).parent / "zizmor"
    if not zizmor.exists():
        pytest.skip("zizmor is not installed (pip install zizmor)")
    for target in (ROOT / ".github" / "workflows", ROOT / "action.yml"):
        result = subprocess.run([str(zizmor), "--offline", str(target)],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr
    go = subprocess.run(["go", "version"], capture_output=True, text=True)
    if go.returncode != 0:
        pytest.skip("go is not installed: actionlint is built with it")
    actionlint = subprocess.run(  # it reads action.yml too, for the `uses: ./` steps
        ["go", "run", "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12",
         *(str(p) for p in sorted((ROOT / ".github" / "workflows").glob("*.yml")))],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert actionlint.returncode == 0, actionlint.stdout + actionlint.stderr


def test_exploration_runs_on_a_schedule_in_shards_merged_into_one_summary() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "explore.yml").read_text())
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML's `on` is True
    assert "schedule" in triggers and "workflow_dispatch" in triggers
    shard = workflow["jobs"]["shard"]
    shards = shard["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, int(workflow["env"]["SHARDS"]) + 1))
    run = " ".join(str(step.get("run", "")) for step in shard["steps"])
    for option in ("--envtest-explore=", "--envtest-explore-shard=", "--envtest-explore-json=",
                   "-n 2"):
        assert option in run, option
    merge = workflow["jobs"]["merge"]
    assert merge["needs"] == "shard"
    assert "envtest explore-merge explore" in " ".join(str(step.get("run", ""))
                                                        for step in merge["steps"])
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "uses" in step and step["uses"] != "./":
                assert len(step["uses"].split("@", 1)[1]) == 40, step["uses"]
