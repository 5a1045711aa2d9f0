"""A loopback HTTP server holding an envtest release index and archives made here.

Used by the tests of downloads (test_binaries, test_index_selectors): real HTTP,
real tar.gz archives whose small scripts stand in for the binaries.
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

from envtest.binaries import platform_suffix


def make_archive(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"controller-tools/envtest/{name}")
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class IndexServer:
    """A loopback HTTP server with an envtest release index and archives."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.releases: dict[str, dict[str, dict[str, str]]] = {}
        self.hits: Counter[str] = Counter()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                with server.lock:
                    server.hits[self.path] += 1
                body = server.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                if body is not None:
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                # Tests cut downloads short on purpose: the client hanging up is expected.
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def publish(self, version: str, files: dict[str, bytes] | None = None,
                sha512: str | None = None, suffix: str | None = None,
                archive: bytes | None = None, served: bytes | None = None) -> str:
        """Add a release to the index (several calls add several); returns the archive's path.

        ``archive``: the bytes the index's hash is of (default: made from ``files``);
        ``served``: what is really served (default: the archive).
        """
        name = f"envtest-v{version}-{suffix or platform_suffix()}.tar.gz"
        archive = archive if archive is not None else make_archive(files or {})
        self.files[f"/{name}"] = served if served is not None else archive
        self.releases.setdefault(f"v{version}", {})[name] = {
            "hash": sha512 or hashlib.sha512(archive).hexdigest(),
            "selfLink": f"{self.url}/{name}"}
        self.files["/index.yaml"] = yaml.safe_dump({"releases": self.releases}).encode()
        return f"/{name}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


