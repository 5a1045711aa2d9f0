"""White-box tests of the control plane's machinery: port claims, the start retry, stale dirs.

These import internal modules on purpose (the one place under tests/ that
may, see README "Contributing"): what they check has no public surface of
its own, only the behaviour the public tests see on top of it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import kubernetes.client
import psutil
import pytest

import envtest.controlplane.lifecycle.start as plane_start
from envtest import ControlPlane, Version, eventually
from envtest.system.ports import free_ports, port_in_use, release_ports, sweep_claims
from envtest.system.workdirs import PREFIX, record_owners, remove_stale_dirs


@pytest.fixture(scope="module")
def version(default_binaries_version: Version) -> str:
    return str(default_binaries_version)


# -- ports ---------------------------------------------------------------------------


def test_free_ports_never_returns_a_port_someone_listens_on(tmp_path: Path) -> None:
    listeners = []
    try:
        for _ in range(20):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            listeners.append(listener)
        busy = {s.getsockname()[1] for s in listeners}
        assert all(port_in_use(port) for port in busy)
        handed_out: list[int] = []
        for _ in range(30):
            ports = free_ports(5, claim_dir=tmp_path)
            assert len(set(ports)) == 5
            assert not set(ports) & busy
            assert not [p for p in ports if port_in_use(p)]
            handed_out += ports
        # Claims last: the same process is never handed a port twice.
        assert len(handed_out) == len(set(handed_out))
    finally:
        for listener in listeners:
            listener.close()


_CLAIMER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from envtest.system.ports import free_ports
    claim_dir = Path(sys.argv[1])
    sys.stdin.readline()  # both claimers start together
    ports = []
    for _ in range(4):
        ports += free_ports(100, claim_dir=claim_dir)
    print(json.dumps(ports), flush=True)
    sys.stdin.readline()  # stay alive: a dead (even unreaped) owner's claims are free again
""")


def test_two_processes_claiming_at_once_get_distinct_ports(tmp_path: Path) -> None:
    # 400 ports each from ~28k ephemeral ones: without claims about six would collide.
    claim_dir = tmp_path / "claims"
    claimers = [subprocess.Popen([sys.executable, "-c", _CLAIMER, str(claim_dir)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
    for claimer in claimers:
        assert claimer.stdin is not None
        claimer.stdin.write("go\n")
        claimer.stdin.flush()
    results = []
    for claimer in claimers:
        assert claimer.stdout is not None
        results.append(json.loads(claimer.stdout.readline()))
    for claimer in claimers:
        claimer.communicate("exit\n", timeout=60)
        assert claimer.returncode == 0
    first, second = results
    assert len(set(first)) == len(first) == 400 and len(set(second)) == len(second) == 400
    assert not set(first) & set(second)
    for claimer, ports in zip(claimers, results, strict=True):
        owners = {(claim_dir / str(port)).read_text() for port in ports}
        assert owners == {str(claimer.pid)}


@pytest.mark.parametrize("lost", ["etcd-client", "kube-apiserver"])
def test_a_port_lost_to_a_race_is_retried_with_new_ports(
        version: str, lost: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The first ports handed out include one another process already listens on."""
    index = {"etcd-client": 0, "kube-apiserver": 2}[lost]
    thief = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    thief.bind(("127.0.0.1", 0))
    thief.listen()
    stolen = thief.getsockname()[1]
    handed: list[list[int]] = []

    def racy_free_ports(count: int, *args: object, **kwargs: object) -> list[int]:
        ports = free_ports(count, *args, **kwargs)  # type: ignore[arg-type]
        if not handed:
            ports[index] = stolen
        handed.append(list(ports))
        return ports

    monkeypatch.setattr(plane_start, "free_ports", racy_free_ports)
    control_plane = ControlPlane(version)
    try:
        control_plane.start()
        assert len(handed) == 2, handed
        assert stolen not in handed[1]
        assert control_plane.apiserver is not None and control_plane.etcd is not None
        assert stolen not in (control_plane.apiserver.port, control_plane.etcd.client_port)
        component = "etcd" if lost == "etcd-client" else "kube-apiserver"
        log = control_plane.log_paths[component].read_text()
        assert f"127.0.0.1:{stolen}" in log and "address already in use" in log
        namespaces = kubernetes.client.CoreV1Api(control_plane.api_client()).list_namespace()
        assert "default" in {ns.metadata.name for ns in namespaces.items}
    finally:
        control_plane.stop()
        thief.close()


# -- stale directories ------------------------------------------------------------


def _make_owned_dir(root: Path, label: str, owners: list[int]) -> Path:
    path = root / f"{PREFIX}{label}"
    path.mkdir(mode=0o700)
    record_owners(path, owners)
    return path


def test_remove_stale_dirs_removes_dead_owners_and_keeps_live_ones(tmp_path: Path) -> None:
    finished = subprocess.Popen([sys.executable, "-c", ""])
    finished.wait()  # reaped: its pid is free
    live = _make_owned_dir(tmp_path, "cp-live", [os.getpid()])
    mixed = _make_owned_dir(tmp_path, "cp-mixed", [finished.pid, os.getpid()])
    dead = _make_owned_dir(tmp_path, "cp-dead", [finished.pid])
    foreign = tmp_path / "not-ours"
    foreign.mkdir()
    record_owners(foreign, [finished.pid])
    assert remove_stale_dirs([tmp_path]) == [dead]
    assert live.is_dir() and mixed.is_dir() and foreign.is_dir() and not dead.exists()


def test_a_dir_killed_before_its_owners_file_goes_by_the_pid_in_its_name(
        tmp_path: Path) -> None:
    finished = subprocess.Popen([sys.executable, "-c", ""])
    finished.wait()
    half_made = tmp_path / f"{PREFIX}explore-{finished.pid}-a0lnbw_b"
    mine = tmp_path / f"{PREFIX}explore-{os.getpid()}-x1y2z3_q"
    nameless = tmp_path / f"{PREFIX}explore"
    for path in (half_made, mine, nameless):
        path.mkdir(mode=0o700)
    assert remove_stale_dirs([tmp_path]) == [half_made]
    assert mine.is_dir() and nameless.is_dir()


def test_remove_stale_dirs_treats_a_zombie_owner_as_dead(tmp_path: Path) -> None:
    exited = subprocess.Popen([sys.executable, "-c", ""])
    try:
        eventually(lambda: psutil.Process(exited.pid).status() == psutil.STATUS_ZOMBIE,
                   timeout=10)
        stale = _make_owned_dir(tmp_path, "cp-zombie", [exited.pid])
        assert remove_stale_dirs([tmp_path]) == [stale]
    finally:
        exited.wait()


def test_claims_are_released_and_stale_ones_swept(tmp_path: Path) -> None:
    ports = free_ports(3, claim_dir=tmp_path)
    assert sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == sorted(ports)
    release_ports(ports[:2], claim_dir=tmp_path)
    assert [p.name for p in tmp_path.iterdir() if p.name.isdigit()] == [str(ports[2])]
    # Claims of a dead process and expired ones go at the next sweep; live, fresh ones stay.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (tmp_path / "40001").write_text(dead.stdout.strip())
    (tmp_path / "40002").write_text(str(os.getpid()))
    old = time.time() - 3600
    os.utime(tmp_path / "40002", (old, old))
    assert sweep_claims(tmp_path) == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.isdigit()] == [str(ports[2])]


def test_a_started_control_plane_leaves_no_claims(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("envtest.system.ports._CLAIM_DIR", tmp_path / "claims")
    with ControlPlane() as control_plane:
        assert control_plane.server
        assert not [p for p in (tmp_path / "claims").iterdir() if p.name.isdigit()]
