"""The framework's errors as users read them: the thing and the fix in one line, at their own
line; pytest-envtest's frames and the errors behind it only with ``-v``.

Each inner session (pytester, in a subprocess) is a user's run with a mistake in it: a CRD
path that does not exist, malformed YAML, an operator binary that is missing or not
executable, an existing cluster that does not answer.
"""

from __future__ import annotations

import re
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from envtest import ResourceError, load_manifests

pytest_plugins = ["pytester"]

MISTAKES = textwrap.dedent('''
    from pathlib import Path

    import pytest

    from envtest import KopfOperator

    HERE = Path(__file__).parent

    @pytest.mark.envtest_crds("crds/missing.yaml")
    def test_a_missing_crd_path(k8s):
        pass

    def test_malformed_yaml(apply):
        apply(HERE / "broken.yaml")

    def test_an_operator_not_on_path(run_operator):
        run_operator(["no-such-operator-7f3a", "--kubeconfig", "{kubeconfig}"])

    def test_an_operator_not_built(run_operator):
        run_operator(["./bin/manager", "--kubeconfig", "{kubeconfig}"], cwd=HERE)

    def test_an_operator_not_executable(run_operator):
        run_operator([str(HERE / "operator.sh")])

    def test_kopf_handlers_not_there(run_operator):
        run_operator(KopfOperator("handlers_gone.py"))

    def test_an_operator_given_a_number(run_operator):
        run_operator(42)
''')
BROKEN_YAML = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n   bad: indent\n"
#: Where the framework's own code lives, as paths in a traceback show it.
FRAMEWORK_PATHS = re.compile(r"envtest/(api|pytest_plugin|clusters|controlplane|system)/[\w/]+\.py")


def sections(output: str) -> dict[str, str]:
    """pytest's report sections by test name (``ERROR at setup of x`` counts as ``x``)."""
    found: dict[str, str] = {}
    parts = re.split(r"^_{3,} (.+?) _{3,}$", output, flags=re.MULTILINE)
    for title, body in zip(parts[1::2], parts[2::2], strict=True):
        name = title.removeprefix("ERROR at setup of ").strip()
        found[name] = body.split("\n===", 1)[0]  # up to the next summary banner
    return found


@pytest.fixture
def mistakes(inner_pytester: Any) -> Any:
    inner_pytester.makepyfile(test_mistakes=MISTAKES)
    (inner_pytester.path / "broken.yaml").write_text(BROKEN_YAML)
    script = inner_pytester.path / "operator.sh"
    script.write_text("#!/bin/sh\nsleep 60\n")
    script.chmod(0o644)
    return inner_pytester


def test_each_mistake_is_one_line_naming_the_fix_at_the_users_line(mistakes: Any) -> None:
    result = mistakes.runpytest_subprocess("-p", "no:cacheprovider", timeout=180)
    result.assert_outcomes(failed=6, errors=1)
    output = result.stdout.str()
    found = sections(output)
    # Before: a raw TypeError ('int' object is not iterable) and 60 lines of the framework.
    assert ("operator 'operator': run_operator takes a function fn(api_client, stop_event), "
            "a command (a list of strings") in found["test_an_operator_given_a_number"]
    assert "not 42 (int)" in found["test_an_operator_given_a_number"]

    crd = found["test_a_missing_crd_path"]
    assert f"manifest path {mistakes.path}/crds/missing.yaml does not exist; check the " \
           "path" in crd
    assert re.search(r"test_mistakes.py:\d+: in test_a_missing_crd_path", crd)  # not a fixture
    assert len(crd.strip().splitlines()) <= 4, crd

    yaml_error = found["test_malformed_yaml"]
    assert f"{mistakes.path}/broken.yaml is not valid YAML: line 5, column 7 " \
           "('bad: indent'): mapping values are not allowed" in yaml_error
    assert "<unicode string>" not in yaml_error
    assert '>       apply(HERE / "broken.yaml")' in yaml_error  # the user's own frame

    assert "'no-such-operator-7f3a' is not on PATH" in found["test_an_operator_not_on_path"]
    assert f"{mistakes.path}/bin/manager does not exist; build it first" in \
        found["test_an_operator_not_built"]
    assert f"{mistakes.path}/operator.sh is not executable; chmod +x" in \
        found["test_an_operator_not_executable"]
    assert f"KopfOperator: handlers file {mistakes.path}/handlers_gone.py does not exist" in \
        found["test_kopf_handlers_not_there"]  # before: `kopf run` started, then died

    for name, text in found.items():
        assert not FRAMEWORK_PATHS.search(text), f"{name} shows framework frames:\n{text}"
        for raw in ("FileNotFoundError", "PermissionError", "Traceback",
                    "The above exception was the direct cause"):
            assert raw not in text, f"{name}: {raw}\n{text}"
        assert "-v shows them" in text, name


def test_dash_v_shows_the_frameworks_frames_and_the_cause(mistakes: Any) -> None:
    result = mistakes.runpytest_subprocess("-p", "no:cacheprovider", "-v",
                                           "-k", "malformed or missing_crd", timeout=180)
    result.assert_outcomes(failed=1, errors=1, deselected=5)
    found = sections(result.stdout.str())
    assert "envtest/api/objects/manifests.py" in found["test_malformed_yaml"]
    assert "The above exception was the direct cause" in found["test_malformed_yaml"]
    assert "envtest/pytest_plugin/fixtures/clusters.py" in found["test_a_missing_crd_path"]


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound, never listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_an_existing_cluster_that_does_not_answer_is_one_line(own_plane_pytester: Any,
                                                              refusing_port: int) -> None:
    kubeconfig = own_plane_pytester.path / "kubeconfig"
    kubeconfig.write_text(textwrap.dedent(f"""
        apiVersion: v1
        kind: Config
        clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{refusing_port}"}}}}]
        users: [{{name: u, user: {{token: not-a-secret}}}}]
        contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
        current-context: c
    """))
    own_plane_pytester.makepyfile(test_existing=textwrap.dedent("""
        def test_one(k8s):
            pass

        def test_two(k8s):
            pass
    """))
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--envtest-backend=existing",
        f"--envtest-kubeconfig={kubeconfig}", timeout=120)
    result.assert_outcomes(errors=2)
    output = result.stdout.str()
    expected = (f"the existing cluster at https://127.0.0.1:{refusing_port} (the server of "
                f"kubeconfig {kubeconfig}) does not answer: ConnectionRefusedError: [Errno 111] "
                "Connection refused. Check that it runs")
    # Counted above the short summary: pytest prints its lines whole on CI (CI or
    # BUILD_NUMBER set) and cuts them to the terminal's width elsewhere.
    errors_section = output.split("short test summary info")[0]
    assert errors_section.count(expected) == 2, output  # the second: "failed earlier" + cause
    for noise in ("urllib3", "MaxRetryError", "Traceback", "Retrying"):
        assert noise not in output, noise
    assert len(output.splitlines()) < 40, output  # 576 lines of tracebacks before


def test_paths_in_messages_are_the_files_given(tmp_path: Path) -> None:
    """Library users (no pytest) get the same messages: the file and line of bad YAML."""
    broken = tmp_path / "broken.yaml"
    broken.write_text(BROKEN_YAML)
    with pytest.raises(ResourceError) as raised:
        load_manifests(broken)
    assert str(raised.value).startswith(f"{broken} is not valid YAML: line 5, column 7")
    with pytest.raises(ResourceError, match=r"manifest text is not valid YAML: line \d+, column "):
        load_manifests("apiVersion: v1\nkind: [unclosed\n")


BAD_MARKERS = textwrap.dedent('''
    import pytest

    @pytest.mark.k8s_version("banana")
    def test_version_banana(k8s):
        pass

    @pytest.mark.k8s_version("9.99")
    def test_version_far(k8s):
        pass

    @pytest.mark.envtest_crds(42)
    def test_crds_number(k8s):
        pass

    @pytest.mark.envtest_profile("huge")
    def test_profile_huge(k8s):
        pass

    @pytest.mark.envtest_profile()
    def test_profile_none(k8s):
        pass

    @pytest.mark.envtest_explore("crashes", diff="yes", limit=-3)
    def test_explore_kwargs(run_operator):
        pass

    @pytest.mark.envtest_explore("crashes", limit=-3)
    def test_explore_limit(run_operator):
        pass

    @pytest.mark.envtest_explore("crash")
    def test_explore_kind(run_operator):
        pass

    @pytest.mark.envtest_isolated("please", size=3)
    def test_isolated_size(k8s):
        pass

    @pytest.mark.envtest_isolated("please")
    def test_isolated_please(k8s):
        pass

    @pytest.mark.envtest_controllers(7)
    def test_controllers_number(k8s):
        pass

    def test_good():
        pass
''')

#: Each bad marker's one line: what it names and what it accepts.
BAD_MARKER_LINES = {
    "test_version_banana": ("k8s_version('banana')", "use 1.37, 1.37.2"),
    "test_version_far": ("k8s_version('9.99')", "use 1.37, 1.37.2"),
    "test_crds_number": ("envtest_crds(42)", "give CRDs as paths"),
    "test_profile_huge": ("envtest_profile('huge')", "give one of minimal, cluster"),
    "test_profile_none": ("envtest_profile()", "give one of minimal, cluster"),
    "test_explore_kwargs": ("diff='yes'", "diff= takes True or False"),
    "test_explore_limit": ("limit=-3", "limit= takes a whole number, 0 or more"),
    "test_explore_kind": ("envtest_explore('crash')", "unknown exploration 'crash'; choose"),
    "test_isolated_size": ("size=3", "no keyword size; it takes none"),
    "test_isolated_please": ("envtest_isolated('please')", "it takes no argument"),
    "test_controllers_number": ("envtest_controllers(7)", "give controller names"),
}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["alone", "xdist"])
def test_a_bad_marker_is_one_line_at_its_tests_setup_and_the_others_run(
        own_plane_pytester: Any, workers: list[str]) -> None:
    """Before: an INTERNALERROR (a version), a TypeError through the framework (CRDs), a
    traceback (a profile), or silence (unknown keywords, a negative limit); under xdist a
    usage error in a worker crashed the run."""
    own_plane_pytester.makepyfile(test_markers=BAD_MARKERS)
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", *workers,
                                                     timeout=180)
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    result.assert_outcomes(passed=1, errors=len(BAD_MARKER_LINES))
    found = sections(output)
    for name, words in BAD_MARKER_LINES.items():
        body = "\n".join(line for line in found[name].strip().splitlines()
                         if not line.startswith("[gw"))  # xdist's worker line
        assert len(body.splitlines()) == 1, (name, body)
        assert body.startswith("@pytest.mark."), (name, body)
        for word in words:
            assert word in body, (name, word, body)


@pytest.mark.parametrize("args,said", [
    (["--envtest-start-timeout", "-3"],
     "--envtest-start-timeout=-3: give a number of seconds over 0, e.g. "
     "--envtest-start-timeout=120"),
    (["--envtest-start-timeout", "abc"],
     "--envtest-start-timeout=abc: give a number of seconds over 0"),
    (["--envtest-wait-timeout", "0"],
     "--envtest-wait-timeout=0: give a number of seconds over 0, e.g. "
     "--envtest-wait-timeout=120"),
    (["--envtest-artifacts", "{file}"],
     "--envtest-artifacts={file}: that is a file, not a directory; give a directory"),
    (["--envtest-backend", "existing", "--envtest-kubeconfig", "{folder}"],
     "kubeconfig {folder} is a directory: pass the kubeconfig file in it"),
], ids=["timeout-negative", "timeout-word", "wait-timeout-zero", "artifacts-file",
        "kubeconfig-dir"])
def test_bad_options_are_one_line_naming_the_fix(own_plane_pytester: Any, tmp_path: Path,
                                                 args: list[str], said: str) -> None:
    """Before: -3 was taken, 'abc' said "could not convert string to float", an artifacts
    path that is a file ended the run with a NotADirectoryError traceback (and left the
    plane's private folder behind), a kubeconfig folder "did not exist"."""
    existing = tmp_path / "a-file.txt"
    existing.write_text("not a folder")
    folder = tmp_path / "kube"
    folder.mkdir()
    given = [a.format(file=existing, folder=folder) for a in args]
    own_plane_pytester.makepyfile(test_one="def test_one(k8s):\n    pass\n")
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", *given,
                                                     timeout=180)
    text = result.stdout.str() + result.stderr.str()
    assert said.format(file=existing, folder=folder) in text, text
    assert "Traceback" not in text and "NotADirectoryError" not in text, text
    assert result.ret != 0


@pytest.mark.parametrize("setup,said", [
    ({"env": ("ENVTEST_START_TIMEOUT", "x")},
     "ENVTEST_START_TIMEOUT='x' is not a number of seconds"),
    ({"args": ["--envtest-k8s-version="]},
     "--envtest-k8s-version= is empty: give a version (1.37, 1.36.2, or several: "
     "1.36,1.37), or leave the option out for the default"),
    ({"ini": "[pytest]\nenvtest_exlpore = crashes\n"},
     "unknown setting envtest_exlpore: did you mean envtest_explore?"),
], ids=["env-start-timeout", "empty-version", "misspelt-ini-key"])
def test_bad_settings_are_one_line_before_anything_starts(own_plane_pytester: Any,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          setup: dict[str, Any],
                                                          said: str) -> None:
    """Before: a variable that was no number ended the run with a 28-line INTERNALERROR; an
    empty version took the default, and a misspelt ini key kept its setting's default,
    without a word (pytest's generic warning aside)."""
    if "env" in setup:
        monkeypatch.setenv(*setup["env"])
    if "ini" in setup:
        own_plane_pytester.makefile(".ini", pytest=setup["ini"])
    own_plane_pytester.makepyfile(test_one="def test_one(k8s):\n    pass\n")
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                                     *setup.get("args", []), timeout=120)
    text = result.stdout.str() + result.stderr.str()
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert said in text, text
    assert "INTERNALERROR" not in text and "Traceback" not in text, text
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), lines
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_an_artifacts_folder_that_cannot_be_written_is_said_at_once(
        own_plane_pytester: Any) -> None:
    """Before: the test passed, then pytest ended with an 86-line traceback (OSError, from
    the copy of the plane's logs), and the plane's folders stayed until a later run."""
    own_plane_pytester.makepyfile(test_one="def test_one(k8s):\n    pass\n")
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--envtest-artifacts=/sys/envtest-artifacts", timeout=120)
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "ERROR: --envtest-artifacts /sys/envtest-artifacts: cannot be written"), lines
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_logs_that_cannot_be_copied_at_the_end_are_one_line_and_nothing_stays(
        own_plane_pytester: Any, tmp_path: Path, envtest: Any) -> None:
    """A folder that turns out unwritable when the plane stops (here, a folder where its
    log's file goes): one line at the end, the test's result stands, the plane's private
    folders are removed all the same."""
    import tempfile

    artifacts = tmp_path / "artifacts"
    blocker = artifacts / f"control-plane-main-{envtest.version}" / "kube-apiserver.log"
    blocker.mkdir(parents=True)
    before = set(Path(tempfile.gettempdir()).glob("pytest-envtest-cp-*"))
    own_plane_pytester.makepyfile(test_one="def test_one(k8s):\n    pass\n")
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--envtest-artifacts={artifacts}", timeout=180)
    text = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)
    assert "Traceback" not in text, text
    assert f"the artifacts folder {blocker.parent} cannot be written (Is a directory)" in \
        text, text
    # Folders of planes whose process is gone (other workers' planes run meanwhile).
    left = {folder for folder in set(Path(tempfile.gettempdir()).glob("pytest-envtest-cp-*"))
            - before if not psutil.pid_exists(int(folder.name.split("-")[3]))}
    assert not left, left


MATRIX_NOT_INSTALLED = textwrap.dedent('''
    import pytest


    @pytest.mark.k8s_version("1.31")
    def test_one(k8s):
        pass


    @pytest.mark.k8s_version("1.31")
    def test_two(k8s):
        pass


    @pytest.mark.k8s_version("1.31")
    def test_three(k8s):
        pass
''')


def test_a_version_not_installed_is_said_in_full_once_at_the_users_line(
        own_plane_pytester: Any) -> None:
    """With pytest-asyncio installed (it wraps every fixture), the error was shown at
    ``pytest_asyncio/plugin.py:934``; and each of nine tests printed the same full error."""
    own_plane_pytester.makepyfile(test_matrix=MATRIX_NOT_INSTALLED)
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "asyncio", "--envtest-installed-only", timeout=120)
    result.assert_outcomes(errors=3)
    output = result.stdout.str()
    assert "pytest_asyncio" not in output, output
    for line, name in ((4, "one"), (9, "two"), (14, "three")):
        assert f"test_matrix.py:{line}: in test_{name}" in output, output
    # The errors as reported (the short summary after them repeats each one's first line,
    # cut to the terminal's width except where a CI variable is set).
    reported = output.split("short test summary info")[0]
    assert reported.count("no Kubernetes release matches 1.31 in the cache") == 1, output
    assert reported.count("Kubernetes 1.31 cannot be had here, as the first test that asked "
                          "for it was told in full: run 'envtest use 1.31'") == 2, output
