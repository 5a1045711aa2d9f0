"""A full disk says so: "no space left on <path>" and what needs it, at start and mid-run.

Real small filesystems (a tmpfs of a few MiB, mounted for the test) are filled for real;
where mounting is not allowed (an unprivileged CI runner) the tests skip, saying why.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from framework_helpers import machine_busy

import envtest
from envtest import ControlPlane, ControlPlaneError, eventually

pytest_plugins = ["pytester"]


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its filesystem refuses even one more byte."""
    filler = directory / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = 1 << 20
        while chunk:
            try:
                os.write(descriptor, b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                chunk //= 2
    finally:
        os.close(descriptor)
    return filler


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``small_filesystem("8m")``: a tmpfs of that size, unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        point = tmp_path / f"small-{len(mounted)}"
        point.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700",
                                 "tmpfs", str(point)], capture_output=True, text=True,
                                check=False)
        if result.returncode != 0:
            pytest.skip("a full disk is tested on a small real filesystem, and mounting a "
                        f"tmpfs failed here ({result.stderr.strip() or result.returncode}): "
                        "it needs root or CAP_SYS_ADMIN")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:  # lazily: a child killed at the end may still hold a file there
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


def test_a_start_on_a_full_disk_names_the_place_and_leaves_nothing(
        small_filesystem: Callable[[str], Path]) -> None:
    full = small_filesystem("4m")
    fill(full)
    with pytest.raises(ControlPlaneError) as raised:
        ControlPlane(work_root=full).start()
    assert type(raised.value).__name__ == "DiskFullError"
    assert str(raised.value).startswith(
        f"no space left on {full}: the control plane's work dir (certificates, kubeconfigs, "
        "logs, the audit log) needs it"), raised.value
    assert sorted(p.name for p in full.iterdir()) == ["filler"]  # no half-made directory


def test_etcd_data_on_too_small_a_filesystem_is_named(
        small_filesystem: Callable[[str], Path]) -> None:
    # etcd preallocates 64 MiB for its write-ahead log.
    small = small_filesystem("16m")
    plane = ControlPlane(etcd_args={"data-dir": str(small / "data")})
    with pytest.raises(ControlPlaneError) as raised:
        plane.start()
    assert type(raised.value).__name__ == "DiskFullError"
    assert str(raised.value).startswith(
        f"no space left on {small}: etcd's data needs it ({small / 'data'})"), raised.value
    assert plane.pids == {} or not any(_alive(pid) for pid in plane.pids.values())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


FILLS_THE_DISK = textwrap.dedent('''
    import errno
    import json
    import os
    import tempfile
    import time
    from pathlib import Path

    CONFIG_MAP = {"metadata": {"generateName": "c-"}}


    def fill(directory):
        descriptor = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        chunk = 1 << 20
        while chunk:
            try:
                os.write(descriptor, b"\\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                chunk //= 2
        os.close(descriptor)


    def timed_count(api_calls, test):
        """The count's own time (the framework's work), whatever the machine's load."""
        started = time.monotonic()
        try:
            return api_calls.count(verb="create")
        finally:
            with open(os.environ["DURATIONS_FILE"], "a") as out:
                out.write(json.dumps([test, "count", time.monotonic() - started]) + "\\n")


    def test_a_fills_the_disk_then_counts(k8s, namespace, api_calls):
        fill(Path(tempfile.gettempdir()))
        for _ in range(20):  # served; the audit log's last page takes the first few lines
            k8s.core.create_namespaced_config_map(namespace, CONFIG_MAP)
        assert timed_count(api_calls, "test_a_fills_the_disk_then_counts") >= 1


    def test_b_counts_later(k8s, namespace, api_calls):
        k8s.core.create_namespaced_config_map(namespace, CONFIG_MAP)
        assert timed_count(api_calls, "test_b_counts_later") >= 1


    def test_c_needs_no_audit_log(k8s, namespace):
        assert k8s.core.create_namespaced_config_map(namespace, CONFIG_MAP).metadata.name
''')
RECORDS_DURATIONS = textwrap.dedent('''
    import json
    import os

    def pytest_runtest_logreport(report):
        with open(os.environ["DURATIONS_FILE"], "a") as out:
            out.write(json.dumps([report.nodeid, report.when, report.duration]) + "\\n")
''')


def test_a_disk_filling_mid_run_fails_the_tests_that_count_calls_at_once_saying_why(
        own_plane_pytester: Any, small_filesystem: Callable[[str], Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    small = small_filesystem("16m")
    durations = own_plane_pytester.path / "durations.jsonl"
    monkeypatch.setenv("TMPDIR", str(small))  # the control plane's work dir and audit log
    monkeypatch.setenv("ENVTEST_PORTABLE", "0")  # etcd's data stays on /dev/shm
    monkeypatch.setenv("DURATIONS_FILE", str(durations))
    own_plane_pytester.makeconftest(RECORDS_DURATIONS)
    own_plane_pytester.makepyfile(test_full=FILLS_THE_DISK)
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=180)
    output = result.stdout.str()
    result.assert_outcomes(failed=2, passed=1)

    reason = (f"no space left on {small}: the audit log (api_calls, the timeline report) "
              "needs it")
    failures = dict(re.findall(r"^_{3,} (\w+) _{3,}$\n(.*?)(?=^_{3,} \w+ _{3,}$|^={3,})",
                               output, flags=re.MULTILINE | re.DOTALL))
    for test in ("test_a_fills_the_disk_then_counts", "test_b_counts_later"):
        assert f"DiskFullError: {reason}" in failures[test], failures.get(test, output)
    warnings = output.split("warnings summary", 1)[1]
    assert warnings.count(f"EnvtestWarning: {reason}") == 1, warnings  # said once

    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, float] = {}
    for line in durations.read_text().splitlines():
        nodeid, when, duration = json.loads(line)
        test = nodeid.split("::")[-1]
        if when == "count":
            counts[test] = duration
        elif not (test.startswith("test_a") and when == "setup"):  # it starts the cluster
            seconds[test] += duration
    # Each count took 10 s or more before (a swallowed mark timeout, then the sync's): now
    # it fails at once, on any machine.
    assert sorted(counts) == ["test_a_fills_the_disk_then_counts", "test_b_counts_later"]
    assert all(took < 3.0 for took in counts.values()), counts
    if not machine_busy():  # whole tests: 15.3 s for the first with a second make test beside
        # The first also fills the disk and makes 20 calls: 6.5 s once, in a 4-worker make
        # test on 2 cores; the later ones take a fraction of a second.
        first = seconds.pop("test_a_fills_the_disk_then_counts")
        assert first < 9.0, f"the test that filled the disk took {first:.1f} s"
        assert all(took < 5.0 for took in seconds.values()), dict(seconds)


FAILS_ON_A_FULL_DISK = textwrap.dedent('''
    import errno
    import os
    from pathlib import Path


    def fill(directory):
        descriptor = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        chunk = 1 << 20
        while chunk:
            try:
                os.write(descriptor, b"\\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                chunk //= 2
        os.close(descriptor)


    def test_a_fills_the_disk_then_fails(k8s, namespace):
        fill(Path(os.environ["FULL"]))
        assert not "the disk is full", "fails on purpose"


    def test_b_passes(k8s, namespace):
        assert k8s.core.list_namespaced_config_map(namespace).items == []
''')


def test_a_failed_tests_report_on_a_full_disk_is_one_line_and_the_results_stay(
        own_plane_pytester: Any, small_filesystem: Callable[[str], Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest's basetemp (where a failed test's report goes by default) on the full TMPDIR:
    before, an INTERNALERROR OSError 28 from making the report folder, rc 3, no results."""
    small = small_filesystem("16m")
    monkeypatch.setenv("TMPDIR", str(small))
    monkeypatch.setenv("ENVTEST_PORTABLE", "0")  # etcd's data stays on /dev/shm
    monkeypatch.setenv("FULL", str(small))
    own_plane_pytester.makepyfile(test_full=FAILS_ON_A_FULL_DISK)
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--basetemp={small / 'basetemp'}", timeout=180)
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    result.assert_outcomes(failed=1, passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = [line for line in output.splitlines() if line.startswith("DiskFullError: ")]
    assert lines == [f"DiskFullError: no space left on {small}: the failed test's report "
                     f"needs it ({small / 'basetemp'}); its report is in the terminal only; "
                     "free space there, or point TMPDIR at a filesystem with room"], output
    assert "fails on purpose" in output and "envtest: API calls during the test" in output


PASSES_TWICE = textwrap.dedent('''
    def test_c_passes(k8s, namespace):
        assert k8s.core.list_namespaced_config_map(namespace).items == []


    def test_d_passes(k8s, namespace):
        assert k8s.core.list_namespaced_config_map(namespace).items == []
''')


def test_artifacts_on_a_full_disk_are_one_line_at_the_end_and_the_results_stay(
        own_plane_pytester: Any, small_filesystem: Callable[[str], Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: both tests passed, then the session's end raised an OSError 28 traceback from
    copying the control plane's logs, rc 1."""
    artifacts = small_filesystem("2m")
    fill(artifacts)
    work = own_plane_pytester.path / "tmp"
    work.mkdir()
    monkeypatch.setenv("TMPDIR", str(work))
    own_plane_pytester.makepyfile(test_passes=PASSES_TWICE)
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--envtest-artifacts={artifacts / 'ci'}", timeout=180)
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    lines = [line for line in output.splitlines() if "DiskFullError" in line]
    assert len(lines) == 1, output
    assert lines[0].startswith(f"envtest: DiskFullError: no space left on {artifacts}: the "
                               "copy of the control plane's logs needs it"), lines
    assert lines[0].endswith("free space there, or give the artifacts a folder on a "
                             "filesystem with room"), lines
    assert not list(work.glob("pytest-envtest-cp-*")), "the plane's work dir was left"


def test_etcd_that_dies_of_a_full_disk_during_a_test_says_so(
        small_filesystem: Callable[[str], Path]) -> None:
    """Before: ``ProcessExitedError: etcd exited with code 1``, "no space left on device"
    only inside its log lines (at start the same condition was a clear DiskFullError)."""
    small = small_filesystem("80m")  # etcd preallocates 64 MiB for its write-ahead log
    plane = ControlPlane(etcd_args={"data-dir": str(small / "data")}).start()
    try:
        filler = os.open(small / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        chunk = 1 << 20
        while chunk:
            try:
                os.write(filler, b"\0" * chunk)
            except OSError:
                chunk //= 2
        os.close(filler)
        core = kubernetes.client.CoreV1Api(plane.api_client())
        big = "x" * 200_000

        def dead() -> bool:
            try:
                core.create_namespaced_config_map("default", {
                    "metadata": {"generateName": "fill-"}, "data": {"x": big}})
            except Exception:
                pass
            try:
                plane.check_alive()
            except ControlPlaneError:
                return True
            return False

        eventually(dead, timeout=60, interval=0.05)
        with pytest.raises(ControlPlaneError) as raised:
            plane.check_alive()
        error = raised.value
        assert isinstance(error, envtest.DiskFullError) and \
            isinstance(error, envtest.ProcessExitedError), type(error)
        first = str(error).splitlines()[0]
        assert first.startswith("etcd exited with code") and \
            "no space left on device (a filesystem it writes to is full" in first, first
    finally:
        plane.stop()
