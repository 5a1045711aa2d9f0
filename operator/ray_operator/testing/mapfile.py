"""A Dashboard resolver backed by a JSON file, for an operator running in another process.

The test process writes ``{"<namespace>/<cluster>": "http://127.0.0.1:<port>"}`` (see
``FakeDashboardFleet(map_file=...)``) and starts the operator with
``--dashboard-resolver ray_operator.testing:file_resolver`` and the file's path in
``RAY_OPERATOR_DASHBOARD_MAP``. The file is re-read whenever it changes; writers replace it
atomically so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

MAP_ENV = "RAY_OPERATOR_DASHBOARD_MAP"


def write_dashboard_map(path: str | os.PathLike[str], mapping: dict[str, str]) -> None:
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(mapping, handle, sort_keys=True)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileResolver:
    """``resolver(namespace, cluster, head_service)``. The path defaults to the file named by
    $RAY_OPERATOR_DASHBOARD_MAP at call time. Unknown clusters raise LookupError (the operator
    then treats the Dashboard as unreachable)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._mapping: dict[str, str] = {}

    def __call__(self, namespace: str, cluster: str, head_service: str) -> str:
        mapping = self._load()
        try:
            return mapping[f"{namespace}/{cluster}"]
        except KeyError:
            raise LookupError(
                f"no Dashboard address for {namespace}/{cluster} in {self._file()}"
            ) from None

    def _file(self) -> Path:
        if self._path is not None:
            return self._path
        value = os.environ.get(MAP_ENV)
        if not value:
            raise LookupError(f"{MAP_ENV} is not set; it must name the Dashboard map file")
        return Path(value)

    def _load(self) -> dict[str, str]:
        path = self._file()
        try:
            info = path.stat()
        except FileNotFoundError:
            raise LookupError(f"Dashboard map file {path} does not exist") from None
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._mapping = json.loads(path.read_text() or "{}")
                self._stamp = stamp
            return self._mapping


file_resolver = FileResolver()
