"""KWOK's own controller on our control plane: the yardstick for the Pod lifecycle engine.

KWOK (``sigs.k8s.io/kwok``) is what the Kubernetes world uses to fake Nodes and Pods at
scale. Running its ``kwok`` binary out of cluster against the same control plane, with the
same Deployments, Nodes and observer, turns "fast" into a ratio that means something on any
machine. The binary is built here from Go modules (``go install``) once and cached; without
Go, :func:`kwok_binary` raises :class:`KwokUnavailable` with the reason, and the bench skips
the comparison saying so.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from envtest import ControlPlane, User, eventually, request

KWOK_VERSION = "v0.8.0"
KWOK_PACKAGE = "sigs.k8s.io/kwok/cmd/kwok"
# The annotation KWOK's documentation uses to pick the Nodes it manages.
MANAGED = ("kwok.x-k8s.io/node", "fake")
CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}


class KwokUnavailable(RuntimeError):
    """KWOK cannot be had on this machine (the message says why and what would fix it)."""


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pytest-envtest" / f"kwok-{KWOK_VERSION}"


def kwok_binary(version: str = KWOK_VERSION) -> Path:
    """The ``kwok`` binary of ``version``, built with ``go install`` on first use (minutes)."""
    target = cache_dir() / "kwok"
    if target.exists():
        return target
    go = shutil.which("go")
    if go is None:
        raise KwokUnavailable("no 'go' on PATH: KWOK is built from Go modules; install Go "
                              "(1.26 or newer) to compare with it")
    env = {**os.environ, "GOBIN": str(target.parent), "CGO_ENABLED": "0"}
    target.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([go, "install", f"{KWOK_PACKAGE}@{version}"], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0 or not target.exists():
        raise KwokUnavailable(f"'go install {KWOK_PACKAGE}@{version}' failed "
                              f"(exit {done.returncode}): {done.stderr.strip()[-600:]}")
    return target


#: The stages kwokctl gives its clusters (node init, Lease heartbeats, Pod ready, complete
#: and delete), from the module's own source: kwok alone starts with none.
STAGES = ("kustomize/stage/node/fast/node-initialize.yaml",
          "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
          "kustomize/stage/pod/fast/pod-ready.yaml", "kustomize/stage/pod/fast/pod-complete.yaml",
          "kustomize/stage/pod/fast/pod-delete.yaml")


def kwok_stages(version: str = KWOK_VERSION) -> Path:
    """A ``--config`` file holding kwokctl's default stages, read from the Go module cache
    (where ``go install`` put the module's source)."""
    target = cache_dir() / "stages.yaml"
    if target.exists():
        return target
    modules = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                             check=True).stdout.strip()
    source = Path(modules) / f"sigs.k8s.io/kwok@{version}"
    target.write_text("\n---\n".join((source / stage).read_text() for stage in STAGES))
    return target


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the bench dies, however it dies, so a
    killed bench leaves no kwok behind writing to a plane that is gone."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def kwok_node(name: str) -> dict[str, Any]:
    """A Node as KWOK's documentation creates one: annotated for it, no kubelet behind."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {MANAGED[0]: MANAGED[1],
                                                       "node.alpha.kubernetes.io/ttl": "0"},
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "type": "kwok"}},
            "status": {"capacity": dict(CAPACITY), "allocatable": dict(CAPACITY)}}


class Kwok:
    """A running ``kwok`` process managing ``nodes`` Nodes of ``control_plane``."""

    def __init__(self, binary: Path, control_plane: ControlPlane, nodes: int,
                 log_path: Path) -> None:
        self.binary, self.control_plane, self.nodes = binary, control_plane, nodes
        self.stages = kwok_stages()
        self.log_path = log_path
        self.user: User = control_plane.add_user("kwok", ("system:masters",))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> Kwok:
        with self.user.api_client() as client:
            for i in range(self.nodes):
                request(client, "POST", "/api/v1/nodes", body=kwok_node(f"kwok-node-{i}"))
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(self.binary), f"--kubeconfig={self.user.kubeconfig_path}",
                 f"--config={self.stages}",
                 "--manage-all-nodes=false",
                 f"--manage-nodes-with-annotation-selector={MANAGED[0]}={MANAGED[1]}",
                 "--manage-nodes-with-label-selector=", "--manage-single-node=",
                 "--cidr=10.0.0.0/16", "--node-ip=10.0.0.1",
                 "--node-lease-duration-seconds=40"],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self._wait_nodes_ready(timeout)
        return self

    def _wait_nodes_ready(self, timeout: float) -> None:
        with self.user.api_client() as client:

            def all_ready() -> list[dict[str, Any]] | None:
                self.check_alive()
                nodes = request(client, "GET", "/api/v1/nodes")["items"]
                ready = sum(1 for n in nodes if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in (n.get("status") or {}).get("conditions") or []))
                return nodes if ready >= self.nodes else None

            nodes = eventually(all_ready, timeout=timeout, interval=0.2,
                               message=f"KWOK made fewer than {self.nodes} Nodes Ready; see "
                                       f"{self.log_path}")
            # The apiserver tainted each new Node not-ready (TaintNodesByCondition), and the
            # cluster profile runs no node lifecycle controller to lift it: done here once
            # per Node, as our own Node fleet does.
            for node in nodes:
                request(client, "PATCH", f"/api/v1/nodes/{node['metadata']['name']}",
                        body={"spec": {"taints": None}},
                        content_type="application/merge-patch+json")

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"kwok exited with {self.process.returncode}; see "
                               f"{self.log_path}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
