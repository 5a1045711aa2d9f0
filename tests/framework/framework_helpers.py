"""Plain helpers shared by the framework tests (fixtures live in conftest.py).

The Widget CRD is the one the tests' tiny controller reconciles; several
modules create Widgets, so its definition lives here once (CRDs are cluster
scoped: two diverging definitions would fight over the same name).
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from envtest import eventually

# pytester points HOME at a temporary directory; inner runs must still find the
# binary cache, which lives under the real ${XDG_DATA_HOME:-~/.local/share}.
REAL_DATA_HOME = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
KUBECTL = Path(sys.executable).parent / "kubectl"
#: The binary cache of this machine (setup-envtest's layout).
K8S_CACHE = Path(REAL_DATA_HOME) / "kubebuilder-envtest" / "k8s"


def machine_busy() -> bool:
    """Whether this machine's load (the last minute's average) is past its cores: a shared
    CI runner, or a second make test beside this one (load 15-21 on 2 cores here). Bounds
    on wall time that must hold there get a busy value, still below what the old
    behaviour they tell apart took."""
    return os.getloadavg()[0] > (os.cpu_count() or 1)


def installed_minors() -> dict[int, Path]:
    """Each minor installed here (kube-apiserver and etcd) and its newest entry."""
    found: dict[int, Path] = {}
    for entry in sorted(K8S_CACHE.glob("1.*-*-*"), key=lambda p: [
            int(n) for n in p.name.split("-")[0].split(".")]):
        if (entry / "kube-apiserver").is_file() and (entry / "etcd").is_file():
            found[int(entry.name.split(".")[1])] = entry
    return found

WIDGET_GROUP, WIDGET_VERSION, WIDGET_PLURAL = "example.com", "v1", "widgets"
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": WIDGET_GROUP,
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": WIDGET_PLURAL, "singular": "widget",
                  "listKind": "WidgetList"},
        "versions": [{
            "name": WIDGET_VERSION, "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object",
                             "properties": {"image": {"type": "string"}}},
                    "status": {"type": "object",
                               "properties": {"ready": {"type": "boolean"}}},
                },
            }},
        }],
    },
}


def widget(name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if finalizers:
        metadata["finalizers"] = finalizers
    return {"apiVersion": f"{WIDGET_GROUP}/{WIDGET_VERSION}", "kind": "Widget",
            "metadata": metadata, "spec": {"image": "busybox"}}


def pod_body(name: str, labels: dict[str, str] | None = None,
             containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": c, "image": f"example.com/{c}:1"}
                                    for c in containers]}}


def unused_port() -> int:
    """A loopback port nothing listens on (at the moment of asking)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- child processes ---------------------------------------------------------------


def survivors(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Processes still running (a zombie waiting for its reaper counts as gone)."""
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            pass
    return alive


def assert_gone(processes: list[psutil.Process], timeout: float = 5.0, what: str = "") -> None:
    assert processes, "no processes to check (the test captured nothing)"
    eventually(lambda: not survivors(processes), timeout=timeout, interval=0.05,
               message=f"{what or 'processes'} still running: {survivors(processes)}")


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["KUBECONFIG"] = str(kubeconfig)
    env["HOME"] = str(kubeconfig.parent)  # kubectl's discovery cache stays in the private dir
    return subprocess.run([str(KUBECTL), *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


class LineReader:
    """Reads a child's stdout in a thread, so waiting for a line has a timeout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        assert process.stdout is not None
        self._thread = threading.Thread(target=self._pump, args=(process.stdout,), daemon=True)
        self._thread.start()

    def _pump(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, prefix: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no line starting with {prefix!r} within {timeout} s; "
                                     f"got {self.lines}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"output ended before a line starting with {prefix!r}; "
                                     f"got {self.lines}")
            self.lines.append(line)
            if line.startswith(prefix):
                return line

    def rest(self, timeout: float = 10.0) -> list[str]:
        self._thread.join(timeout)
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                return self.lines
            if line is not None:
                self.lines.append(line)
