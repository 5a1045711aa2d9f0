"""``envtest up`` never overwrites nor deletes a file it did not write, and says at once
what it cannot write.

Before, ``envtest up --kubeconfig-out k`` overwrote ``k`` and deleted it on Ctrl-C (a
user's ``~/.kube/config`` would have gone), a folder there gave a 25-line chained traceback,
and ``--record`` to a place that cannot be written was found only at Ctrl-C, the session's
recording lost.  Each is a real ``envtest up`` process here.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import psutil
from framework_helpers import LineReader

ENVTEST = str(Path(sys.executable).parent / "envtest")


def _sigint_by_default() -> None:  # CI may start the suite with SIGINT ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _refused(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([ENVTEST, "up", *args], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "control plane ready" not in done.stdout  # refused before anything started
    return done


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_an_existing_kubeconfig_is_neither_overwritten_nor_deleted(tmp_path: Path) -> None:
    mine = tmp_path / "config"
    mine.write_text("mine\n")
    line = _one_line(_refused("--kubeconfig-out", str(mine)))
    assert "--kubeconfig-out" in line and str(mine) in line, line
    assert "never overwrites or deletes a file it did not write" in line, line
    assert mine.read_text() == "mine\n"


def test_a_folder_or_an_unwritable_kubeconfig_path_is_one_line(tmp_path: Path) -> None:
    line = _one_line(_refused("--kubeconfig-out", str(tmp_path)))
    assert "is a directory" in line and str(tmp_path) in line, line
    # /sys refuses a new file even to root (a read-only folder would not stop root).
    line = _one_line(_refused("--kubeconfig-out", "/sys/envtest-kubeconfig"))
    assert "cannot be written" in line and "/sys/envtest-kubeconfig" in line, line


def test_a_record_folder_that_cannot_be_written_is_said_before_the_start(
        tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    line = _one_line(_refused("--record", str(afile), "--kubeconfig-out",
                              str(tmp_path / "k1")))
    assert "--record" in line and "is a file, not a folder" in line, line
    line = _one_line(_refused("--record", "/sys/envtest-record", "--kubeconfig-out",
                              str(tmp_path / "k2")))
    assert "--record" in line and "cannot be written" in line, line
    assert not (tmp_path / "k1").exists() and not (tmp_path / "k2").exists()  # none left


def test_the_kubeconfig_it_made_is_private_and_removed_at_ctrl_c(tmp_path: Path) -> None:
    target = tmp_path / "made" / "kubeconfig"  # its folder made too
    up = subprocess.Popen([ENVTEST, "up", "--kubeconfig-out", str(target)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=os.environ.copy(), preexec_fn=_sigint_by_default)
    try:
        assert up.stdout is not None
        reader = LineReader(up)
        reader.wait_for("Press Ctrl-C to stop.", timeout=120)
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        assert "client-certificate-data" in target.read_text()
        children = psutil.Process(up.pid).children(recursive=True)
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=60) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert not target.exists()
    assert not [c for c in children if c.is_running() and c.status() != "zombie"]
