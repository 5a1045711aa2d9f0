"""pytest interrupted (SIGINT) or killed (SIGKILL) at random moments leaves nothing behind.

An inner pytest run starts a control plane, an operator thread, a Pod
simulator and a namespace, then waits.  It is hit at a random moment (seeded,
printed, so a failure can be replayed), 10 times with SIGINT and 10 with
SIGKILL.  After each hit no etcd, kube-apiserver or kube-controller-manager of
that run may be alive 5 s later; after the next normal run, none of the dead
runs' temporary directories may remain.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from envtest import eventually

#: How the framework names its private dirs (pytest-envtest-<label>-<pid>-...): observable
#: behaviour, since a user looks for leftovers by this name.
PREFIX = "pytest-envtest-"

pytestmark = pytest.mark.reliability

CONTROL_PLANE_NAMES = {"etcd", "kube-apiserver", "kube-controller-manager"}
ROUNDS = 20
INNER_TEST = textwrap.dedent('''
    import threading
    from envtest import consistently

    def idle_operator(api_client, stop):
        stop.wait()

    def test_long(namespace, run_operator, pod_simulator, k8s):
        run_operator(idle_operator)
        pod_simulator(selector="app=x", running_after=0.1)
        consistently(lambda: k8s.core.read_namespace(namespace), duration=30, interval=0.2)
''')


NEXT_TEST = textwrap.dedent('''
    def test_next_run(envtest):
        assert envtest.server.startswith("https://127.0.0.1:")
''')


def _sigint_by_default() -> None:
    """In the child: SIGINT raises KeyboardInterrupt, as at a terminal, even when this run was
    started with SIGINT ignored (a background job of a non-interactive shell, some CI
    runners): Python then installs no handler of its own and the signal would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def control_plane_processes_of(run_pid: int) -> list[psutil.Process]:
    """Control-plane processes whose working dir says they belong to the run ``run_pid``."""
    marker = f"{PREFIX}cp-{run_pid}-"
    found = []
    for process in psutil.process_iter(["name"]):
        if process.info["name"] not in CONTROL_PLANE_NAMES:
            continue
        try:
            if marker in process.cwd() and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def leftover_dirs(run_pids: set[int]) -> list[Path]:
    roots = {Path(tempfile.gettempdir()), Path("/dev/shm")}
    leftovers = []
    for root in roots:
        if not root.is_dir():
            continue
        for path in root.glob(f"{PREFIX}*"):
            parts = path.name[len(PREFIX):].split("-")
            if len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) in run_pids:
                leftovers.append(path)
    return leftovers


def test_interrupted_and_killed_runs_leave_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    seed = int(os.environ.get("ENVTEST_INTERRUPT_SEED", time.time()))
    chooser = random.Random(seed)
    print(f"interrupt seed {seed} (replay with ENVTEST_INTERRUPT_SEED={seed})")
    command = [sys.executable, "-m", "pytest", str(tmp_path / "test_inner.py"), "-q",
               "-p", "no:cacheprovider", "--rootdir", str(tmp_path)]
    run_pids: set[int] = set()
    plan = [signal.SIGINT] * (ROUNDS // 2) + [signal.SIGKILL] * (ROUNDS // 2)
    chooser.shuffle(plan)
    for round_number, sig in enumerate(plan, 1):
        inner = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, preexec_fn=_sigint_by_default)
        run_pids.add(inner.pid)
        delay = chooser.uniform(0.3, 7.0)  # start-up, the test body, or teardown
        try:
            inner.wait(delay)
        except subprocess.TimeoutExpired:
            inner.send_signal(sig)
        try:
            inner.wait(30)
        except subprocess.TimeoutExpired:
            inner.kill()
            pytest.fail(f"round {round_number}: the run did not exit within 30 s of {sig.name}")
        eventually(lambda pid=inner.pid: not control_plane_processes_of(pid), timeout=5,
                   interval=0.1,
                   message=f"round {round_number} ({sig.name} after {delay:.1f} s, seed {seed})"
                           ": control-plane processes survived")

    (tmp_path / "test_next.py").write_text(NEXT_TEST)
    finished = subprocess.run([*command[:3], str(tmp_path / "test_next.py"), *command[4:]],
                              cwd=tmp_path, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stdout[-2000:]
    assert leftover_dirs(run_pids) == []
