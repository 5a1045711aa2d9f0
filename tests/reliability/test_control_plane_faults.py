"""A control-plane process dies mid-test: the test fails fast and says so; a restart recovers.

Each test runs its own control plane (it is killed on purpose) through the
``make_control_plane`` fixture, which watches it like the session's clusters,
so every wait notices the death on its next poll instead of running into its
timeout.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from kubernetes.client import CoreV1Api

from envtest import ControlPlane, ProcessExitedError, eventually


@pytest.fixture
def doomed(make_control_plane) -> ControlPlane:
    """Killed on purpose: a control plane of the test's own, watched like the session's."""
    return make_control_plane()


def _kill_later(pid: int, delay: float) -> threading.Timer:
    timer = threading.Timer(delay, os.kill, (pid, signal.SIGKILL))
    timer.start()
    return timer


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_a_killed_component_fails_the_wait_at_once_then_restart_recovers(
        doomed: ControlPlane, component: str) -> None:
    core = CoreV1Api(doomed.api_client())
    core.create_namespace({"metadata": {"name": "survivor"}})
    core.create_namespaced_config_map("survivor", {"metadata": {"name": "kept"},
                                                   "data": {"k": "v"}})

    timer = _kill_later(doomed.pids[component], 0.5)
    started = time.monotonic()
    with pytest.raises(ProcessExitedError) as died:
        eventually(lambda: False, timeout=60, message="waiting for something that never comes")
    waited = time.monotonic() - started
    timer.join()

    assert died.value.name == component
    assert died.value.exit_code == -signal.SIGKILL
    assert f"{component} exited with code -9" in str(died.value)
    assert waited < 5, f"the death was noticed only after {waited:.1f} s"

    doomed.restart(component)
    doomed.check_alive()
    kept = CoreV1Api(doomed.api_client()).read_namespaced_config_map("kept", "survivor")
    assert kept.data == {"k": "v"}, "etcd's data must survive the restart"


def test_restart_keeps_the_address_so_clients_reconnect(doomed: ControlPlane) -> None:
    server = doomed.server
    client = doomed.api_client()
    doomed.restart("kube-apiserver")
    assert doomed.server == server
    # The same ApiClient (pooled connections to the old process) works again.
    names = eventually(lambda: [n.metadata.name for n in CoreV1Api(client).list_namespace().items],
                       timeout=10)
    assert "default" in names
