"""Ctrl-C while the session finishes: the cleanup completes, one line says so, the summary stays.

The inner pytest is a real subprocess sent a real SIGINT while its session finishes (its
clusters still running, about to be stopped), as a terminal's Ctrl-C would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
from framework_helpers import LineReader

from envtest import eventually

pytest_plugins = ["pytester"]

USES_A_CLUSTER = textwrap.dedent('''
    import json

    def test_uses_a_cluster(envtest, namespace):
        print("\\nPIDS", json.dumps(envtest.pids))  # after pytest's "test_inner.py "
        print("KUBECONFIG", envtest.kubeconfig_path)
''')
WAITS_FOR_CTRL_C = textwrap.dedent('''
    import os

    import pytest


    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary():
        # The session is finishing, its cluster still runs: the outer test sends SIGINT now,
        # then one byte on stdin (so the signal has arrived when this returns).
        print("FINISHING", flush=True)
        os.read(0, 1)
''')


def _sigint_by_default() -> None:
    """In the child: SIGINT raises KeyboardInterrupt, whatever the runner ignores."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_session_finish_stops_the_clusters_and_keeps_the_summary(
        own_plane_pytester: Any) -> None:
    own_plane_pytester.makeconftest(WAITS_FOR_CTRL_C)
    own_plane_pytester.makepyfile(test_inner=USES_A_CLUSTER)
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "test_inner.py"],
        cwd=own_plane_pytester.path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
        preexec_fn=_sigint_by_default)
    try:
        reader = LineReader(inner)
        pids = json.loads(reader.wait_for("PIDS", timeout=120).split(" ", 1)[1])
        workdir = Path(reader.wait_for("KUBECONFIG").split(" ", 1)[1]).parent
        reader.wait_for("FINISHING")
        assert pids and all(psutil.pid_exists(pid) for pid in pids.values())
        inner.send_signal(signal.SIGINT)
        assert inner.stdin is not None
        inner.stdin.write("x")
        inner.stdin.close()
        code = inner.wait(timeout=60)
        output = "\n".join(reader.rest())
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait()

    assert "envtest: interrupted during cleanup; 1 cluster stopped" in output, output
    assert "1 passed" in output.splitlines()[-1], output  # pytest's summary, intact
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert code == 2, output  # interrupted, as pytest says it
    assert not workdir.exists()
    eventually(lambda: not [p for p in pids.values() if psutil.pid_exists(p)
                            and psutil.Process(p).status() != psutil.STATUS_ZOMBIE], timeout=10)
