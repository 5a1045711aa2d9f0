"""The simulated Nodes' kubelet API through the real kube-apiserver: round trips of what a
test or an operator does to a Pod's containers, median of ``--rounds`` each, interleaved
(one of each per round, so the machine's drift touches all alike):

- ``pod_get``: a Pod GET (the baseline: one apiserver round trip, no kubelet);
- ``logs``: ``read_namespaced_pod_log`` (apiserver -> kubelet API, HTTPS);
- ``exec``: the Python client's exec of a handler that echoes (WebSocket v5 to the apiserver,
  SPDY/3.1 from it to the kubelet API), from the call to the exit code;
- ``port_forward``: the Python client's port-forward (WebSocket through to the kubelet API),
  one connection: open, send 5 bytes, read them back upper-cased, closed;
- ``kubectl_exec``: ``kubectl exec`` as a process (start included), fewer rounds.

Writes ``bench/results/kubelet-api.json`` and prints a summary.

    python -m bench.bench_kubelet_api [--rounds 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes.client import CoreV1Api
from kubernetes.stream import portforward, stream
from rich.console import Console

from bench.bench_workloads import cluster_profile
from bench.common import RESULTS, save_json, spread
from envtest import ExecResult, PodPlan, create_namespace, start_workloads, wait_for

NAMESPACE = "kubelet-bench"
console = Console()


def echo_server() -> tuple[socket.socket, int]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.sendall(conn.recv(100).upper())
    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    listener, port = echo_server()
    kubectl = str(Path(sys.executable).parent / "kubectl")
    kubectl = kubectl if os.path.exists(kubectl) else (shutil.which("kubectl") or "")
    with cluster_profile() as cp:
        workloads = start_workloads(cp, 1, events=False)
        try:
            workloads.kubelet.add_plan("app=bench", PodPlan(
                exec_handler=lambda r: ExecResult(stdout=" ".join(r.command)),
                ports={80: port}))
            api = cp.api_client()
            core = CoreV1Api(api)
            create_namespace(api, NAMESPACE)
            core.create_namespaced_pod(NAMESPACE, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web", "labels": {"app": "bench"}},
                "spec": {"containers": [{"name": "c", "image": "web"}]}})
            wait_for(api, "Pod", "web", lambda p: p.status.get("phase") == "Running",
                     namespace=NAMESPACE, timeout=60)

            def pod_get() -> None:
                core.read_namespaced_pod("web", NAMESPACE)

            def logs() -> None:
                assert core.read_namespaced_pod_log("web", NAMESPACE).startswith("started")

            def exec_() -> None:
                session = stream(core.connect_get_namespaced_pod_exec, "web", NAMESPACE,
                                 command=["echo", "hi"], stdout=True, stderr=True,
                                 _preload_content=False)
                session.run_forever(timeout=20)
                assert session.returncode == 0 and session.read_stdout() == "echo hi"

            def forward() -> None:
                pf = portforward(core.connect_get_namespaced_pod_portforward, "web",
                                 NAMESPACE, ports="80")
                sock = pf.socket(80)
                sock.settimeout(20)
                sock.sendall(b"hello")
                answer = b""
                while chunk := sock.recv(100):
                    answer += chunk
                sock.close()
                assert answer == b"HELLO", answer

            def kubectl_exec() -> None:
                done = subprocess.run([kubectl, "--kubeconfig", str(cp.kubeconfig_path), "-n",
                                       NAMESPACE, "exec", "web", "--", "echo", "hi"],
                                      capture_output=True, text=True, timeout=60, check=False)
                assert (done.returncode, done.stdout) == (0, "echo hi"), done.stderr

            cases: dict[str, Callable[[], None]] = {
                "pod_get": pod_get, "logs": logs, "exec": exec_, "port_forward": forward}
            times: dict[str, list[float]] = {name: [] for name in cases}
            for case in cases.values():  # warm up: connections, first discovery
                case()
            for _ in range(args.rounds):
                for name, case in cases.items():
                    started = time.perf_counter()
                    case()
                    times[name].append((time.perf_counter() - started) * 1000)
            if kubectl:
                times["kubectl_exec"] = []
                for _ in range(max(5, args.rounds // 5)):
                    started = time.perf_counter()
                    kubectl_exec()
                    times["kubectl_exec"].append((time.perf_counter() - started) * 1000)
            api.close()
        finally:
            workloads.stop()
    listener.close()
    result = {"version": cp.version, "rounds": args.rounds, "cpus": os.cpu_count(),
              "milliseconds": {name: spread(values, 2) for name, values in times.items()}}
    path = save_json(RESULTS / "kubelet-api.json", result)
    for name, values in result["milliseconds"].items():
        console.print(f"{name:>13}: median {values['median']:.2f} ms "
                      f"(min {values['min']:.2f}, max {values['max']:.2f}, n {values['n']})")
    console.print(f"written: {path}")


if __name__ == "__main__":
    main()
