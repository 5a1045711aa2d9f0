"""The order keeper, a Go operator (``tests/examples/go_operator``), built for its tests.

It proves the framework's faults work on a compiled operator that is not Python: the tests run
it with ``run_operator([binary, "--kubeconfig", "{kubeconfig}", "--namespace", namespace])``
(``--unsafe`` for the variant with the crash bug). ``build_go_operator(directory)`` builds it
with the local Go toolchain (standard library only: nothing to download) once per process and
source: later calls return the same binary.

No pytest here (bench/ may import this package): without Go, :class:`GoUnavailable` is raised,
and a test turns it into a skip.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

#: The operator's Go module.
SOURCE = Path(__file__).resolve().parents[1] / "examples" / "go_operator"
#: The binary's name.
BINARY = "order-keeper"
#: A first build compiles the standard library's packages it uses (about 15 s on two cores);
#: later ones come from Go's build cache.
BUILD_TIMEOUT = 300.0

#: Binaries built by this process, by the hash of the sources they were built from.
_built: dict[str, Path] = {}
_lock = threading.Lock()


class GoUnavailable(RuntimeError):
    """The Go toolchain is not on PATH: the operator cannot be built here."""


def source_hash(source: Path = SOURCE) -> str:
    """A hash of the module's files (go.mod and the .go files): a change means a new build."""
    digest = hashlib.sha256()
    for path in sorted(source.iterdir()):
        if path.name == "go.mod" or path.suffix in (".go", ".sum"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def build_go_operator(directory: Path, source: Path = SOURCE) -> Path:
    """The order keeper's binary, built into ``directory`` on the first call of this process
    for these sources (``go build -o``, with ``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``); later
    calls return it without building.

    Raises :class:`GoUnavailable` when ``go`` is not on PATH and ``RuntimeError`` with Go's
    output when the build fails.
    """
    key = source_hash(source)
    with _lock:
        binary = _built.get(key)
        if binary is not None and binary.exists():
            return binary
        go = shutil.which("go")
        if go is None:
            raise GoUnavailable(f"the Go toolchain ('go') is not on PATH; it builds the Go "
                                f"operator in {source}")
        binary = Path(directory) / f"{BINARY}-{key[:12]}"
        environment = dict(os.environ)
        environment.update({
            "GOTOOLCHAIN": "local",  # this Go, never a download of the one go.mod names
            "CGO_ENABLED": "0",  # no C compiler needed
            "GOWORK": "off",  # a go.work above the repository must not take the module over
            "GOPROXY": "off",  # the standard library only: a build never reaches the network
            "GOFLAGS": "",  # the machine's flags (-mod=vendor ...) are not this module's
        })
        try:
            subprocess.run([go, "build", "-o", str(binary), "."], cwd=source, env=environment,
                           check=True, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        except subprocess.CalledProcessError as error:
            raise RuntimeError(f"go build of {source} failed (exit {error.returncode}):\n"
                               f"{error.stdout}{error.stderr}") from error
        _built[key] = binary
        return binary
