"""Obtaining binaries: download from an envtest index (loopback) vs the Go build; a warm `use`.

The index is a real HTTP server on 127.0.0.1 serving an archive in the official layout,
made from this machine's real cached binaries, so download + sha512 check + unpack are
measured for real-size binaries.  The Go build is timed in the same run (with the Go caches
as they are: warm after `make test`), next to the cold build recorded in the cache entry.
Writes ``bench/results/binaries.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from bench.common import RESULTS, save_json, spread
from envtest.binaries import Resolver, platform_suffix


def _archive(paths: dict[str, Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, path in paths.items():
            tar.add(path, arcname=f"controller-tools/envtest/{name}")
    return buffer.getvalue()


def _serve(files: dict[str, bytes]) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k8s-version", default=os.environ.get("ENVTEST_K8S_VERSION", "1.37"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-build", action="store_true", help="skip the Go build timing")
    args = parser.parse_args()

    real = Resolver(args.k8s_version, installed_only=True).resolve().binaries
    version = str(real.version)
    paths = {name: real[name] for name in ("kube-apiserver", "etcd")}
    kubectl = shutil.which("kubectl")
    if kubectl:
        paths["kubectl"] = Path(kubectl)
    archive = _archive(paths)
    name = f"envtest-v{version}-{platform_suffix()}.tar.gz"
    files: dict[str, bytes] = {}
    server, url = _serve(files)  # the handler serves this dict: fill it now the URL is known
    files[f"/{name}"] = archive
    files["/index.yaml"] = yaml.safe_dump({"releases": {f"v{version}": {name: {
        "hash": hashlib.sha512(archive).hexdigest(), "selfLink": f"{url}/{name}"}}}}).encode()
    print(f"archive {name}: {len(archive) / 2**20:.0f} MiB ({', '.join(paths)})")

    downloads = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as store:
            started = time.monotonic()
            Resolver(version, bin_dir=store, index_url=f"{url}/index.yaml").resolve()
            downloads.append(time.monotonic() - started)
        print(f"download run {run + 1}: {downloads[-1]:.2f} s")
    server.shutdown()

    build: float | None = None
    if not args.no_build:
        with tempfile.TemporaryDirectory() as store:
            started = time.monotonic()
            Resolver(version, bin_dir=store,
                     index_url="http://127.0.0.1:9/unreachable.yaml").resolve()
            build = time.monotonic() - started
        print(f"Go build (Go caches as they are): {build:.1f} s")
    cold: Any = None
    info = real.kube_apiserver.parent / ".envtest-build.json"
    if info.exists():
        record = json.loads(info.read_text())
        cold = round(sum(float(s["seconds"]) for s in record.get("steps", [])), 1)
        print(f"cold Go build recorded in the cache entry: {cold} s")

    uses = []
    for _ in range(10):
        started = time.monotonic()
        subprocess.run([str(Path(sys.executable).parent / "envtest"), "use", version, "-p",
                        "path"], capture_output=True, check=True)
        uses.append(time.monotonic() - started)
    print(f"envtest use (warm cache) median {statistics.median(uses):.3f} s")

    results = {
        "benchmark": "obtaining binaries", "kubernetes_version": version,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_average": os.getloadavg()},
        "archive_mib": round(len(archive) / 2**20, 1),
        "download_verify_unpack_seconds": spread(downloads),
        "go_build_seconds_same_run": round(build, 1) if build is not None else None,
        "go_build_seconds_cold_recorded": cold,
        "envtest_use_warm_seconds": spread(uses),
    }
    if build is not None:
        results["ratio_go_build_over_download"] = round(build / statistics.median(downloads), 1)
    save_json(RESULTS / "binaries.json", results)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
