"""A matrix in one pytest run: --envtest-k8s-version 1.36,1.37 runs each test once per version.

The inner runs use two minors installed on this machine (real kube-apiservers
of both): each test asks its apiserver's /version and compares it with the
version its id names.  Bad lists fail at configure, naming the fix.
"""

from __future__ import annotations

import re

import pytest
from framework_helpers import installed_minors

from envtest import VersionError, VersionSpec, parse_version_list

pytest_plugins = ["pytester"]

INNER_TESTS = '''
import pytest
from kubernetes import client


def served_minor(k8s):
    return client.VersionApi(k8s.api_client).get_code().minor


def test_version(k8s, k8s_version, pytestconfig):
    # None: the session's one version (the ini option in these runs).
    expected = k8s_version or pytestconfig.getini("envtest_k8s_version")
    assert served_minor(k8s) == expected.split(".")[1]


@pytest.mark.k8s_version("{pinned}")
def test_pinned(k8s):
    assert served_minor(k8s) == "{pinned}".split(".")[1]


def test_without_a_cluster():
    pass
'''


@pytest.fixture
def two_minors() -> tuple[str, str]:
    minors = [f"1.{minor}" for minor in sorted(installed_minors(), reverse=True)]
    if len(minors) < 2:
        pytest.skip(f"needs two Kubernetes minors installed, found {minors or 'none'}: "
                    "envtest use 1.36 builds a second one")
    return minors[1], minors[0]


def test_one_run_runs_each_test_on_two_versions(inner_pytester: pytest.Pytester,
                                                 two_minors: tuple[str, str]) -> None:
    older, newer = two_minors
    inner_pytester.makepyfile(test_inner=INNER_TESTS.replace("{pinned}", older))
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-v", f"--envtest-k8s-version={older},{newer}")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        f"*test_version[[]k8s-{older}[]] PASSED*",
        f"*test_version[[]k8s-{newer}[]] PASSED*",
        f"*test_pinned[[]k8s-{older}[]] PASSED*",
        "*test_without_a_cluster PASSED*",
    ])
    # One control plane per version, each version's line with the release it ran: the
    # session's attached plane (the newest installed) serves its own version, never the other.
    used = re.findall(r"cluster used: (?:local (1\.\d+)\.\d+|(attached))", result.stdout.str())
    assert sorted(used) == sorted([(older, ""), ("", "attached")]), used
    result.stdout.fnmatch_lines([f"envtest: k8s-{older} ({older}.*): 2 passed, 0 failed, "
                                 "0 skipped in *",
                                 f"envtest: k8s-{newer} ({newer}.*): 1 passed, 0 failed, "
                                 "0 skipped in *"])
    # The marker agreed with the matrix: nothing to say about it.
    assert "marker won" not in result.stdout.str()


def test_the_matrix_under_xdist_and_a_marker_outside_it(inner_pytester: pytest.Pytester,
                                                         two_minors: tuple[str, str]) -> None:
    older, newer = two_minors
    inner_pytester.makepyfile(test_inner=INNER_TESTS.replace("{pinned}", older))
    inner_pytester.makeini(f"[pytest]\nenvtest_k8s_version = {newer}\n")
    # A comma in the ini option is a matrix too; here one version, the marker names another.
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        f"envtest: k8s-{older} ({older}.*): 1 passed, 0 failed, 0 skipped in *",
        f"envtest: k8s-{newer} ({newer}.*): 1 passed, 0 failed, 0 skipped in *",
        f"envtest: the k8s_version marker won over the session's Kubernetes {newer} "
        f"(--envtest-k8s-version) for 1 test: test_inner.py::test_pinned on {older}",
    ])
    inner_pytester.makeini(f"[pytest]\nenvtest_k8s_version = {older}, {newer}\n")
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([f"*test_version[[]k8s-{newer}[]] *"])
    # Each worker started at most one control plane per version.
    per_worker = re.findall(r"\[(gw\d)\] cluster used: local (1\.\d+)", result.stdout.str())
    assert len(per_worker) == len(set(per_worker))
    assert {minor for _, minor in per_worker} == {older}  # the newer: the attached plane


@pytest.mark.parametrize(("value", "says"), [
    ("1.36,,1.37", "an empty item"),
    ("1.37,1.37", "named twice"),
    ("1.36,1.x7", "cannot read Kubernetes version '1.x7'"),
])
def test_a_bad_list_is_refused_at_the_start(inner_pytester: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch, value: str,
                                            says: str) -> None:
    inner_pytester.makepyfile(test_inner="def test_nothing(k8s):\n    pass\n")
    monkeypatch.setenv("ENVTEST_K8S_VERSION", value)
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*ENVTEST_K8S_VERSION*{says}*"])


def test_a_list_outside_the_plugin_says_only_the_plugin_runs_a_matrix() -> None:
    assert [str(spec) for spec in parse_version_list(" 1.36 , ~1.37.1 ")] == ["1.36", "~1.37.1"]
    assert parse_version_list("") == ()
    with pytest.raises(VersionError, match=r"only the pytest plugin runs a matrix .* e\.g\. "
                                           r"1\.36"):
        VersionSpec.parse("1.36,1.37")


def test_a_version_not_installed_says_what_gets_it_and_counts_as_an_error(
        inner_pytester: pytest.Pytester) -> None:
    """Under ``--envtest-installed-only`` a minor of the matrix that is not installed: the
    setup error names the ``envtest use`` command that gets it (it named what is installed
    only), and the version's line counts an error, not a failed test."""
    installed = sorted(installed_minors())
    missing = next(f"1.{minor}" for minor in range(20, 29) if minor not in installed)
    inner_pytester.makepyfile(test_inner="def test_nothing(k8s):\n    pass\n")
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--envtest-k8s-version=1.{installed[-1]},{missing}",
        "--envtest-installed-only", timeout=180)
    result.assert_outcomes(passed=1, errors=1)
    output = result.stdout.str()
    assert f"run 'envtest use {missing}' to obtain it" in output, output
    assert f"k8s-{missing}: 0 passed, 0 failed, 1 error, 0 skipped" in output, output
