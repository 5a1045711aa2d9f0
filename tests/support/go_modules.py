"""A released operator built from its Go module source, once per version, as the binaries are.

The Go module proxy serves a public module's tagged versions; ``go mod download`` brings
one into the module cache, the source is copied out (the cache is read-only) and its main
package built there with its own go.mod (``-mod=mod``: an old go.sum may lack what a new Go
asks for).  The binary is kept under ``${XDG_CACHE_HOME:-~/.cache}/pytest-envtest/
known-bugs/<module path>@<version>/`` with the source beside it (the CRDs and RBAC the
scenarios install come from there), so a second run builds nothing.  Nothing here is
committed of the operator's: its code stays in the cache.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

#: Go may be installed without being on PATH in non-login shells (as in the Makefile).
GO_PATHS = ("/usr/local/go/bin",)
BUILD_TIMEOUT = 1800.0
#: Where a main package of ours is put in an operator's source (``build(main=...)``).
OUR_MAIN = "envtest_main"


class BuildUnavailable(RuntimeError):
    """Go is missing, or the module proxy does not serve that version."""


@dataclass(frozen=True)
class Built:
    module: str
    version: str
    source: Path
    binary: Path
    seconds: float = 0.0


def cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pytest-envtest" / "known-bugs"


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([env.get("PATH", ""), *GO_PATHS])
    env["GOFLAGS"] = "-mod=mod"
    return env


def build(module: str, version: str, package: str = ".",
          replaces: tuple[tuple[str, str], ...] = (), main: Path | None = None) -> Built:
    """The operator ``module@version`` built (or found built): its main ``package``;
    ``replaces`` are ``(module, module@version)`` pairs for its go.mod, for dependencies the
    module proxy no longer serves under their old names (a vanity domain gone: vbom.ml/util
    is github.com/fvbommel/util); the operator's own code is unchanged.  ``main``: a main
    package of ours (a Go file) built in the operator's module instead of its own, where its
    own needs what only a Pod has (an in-cluster namespace file, its own Pod object for a
    leader lock); the operator's packages it starts are unchanged.
    :class:`BuildUnavailable` says why not."""
    folder = cache_root() / f"{module}@{version}"
    binary = folder / (f"operator-{main.stem}" if main else "operator")
    source = folder / "source"
    if main:
        package = f"./{OUR_MAIN}"
        if binary.exists() and source.exists():
            return Built(module, version, source, binary)
        if source.exists():  # built before with its own main: add ours beside it
            return _compile(module, version, source, binary, package, main, time.monotonic())
    if binary.exists() and source.exists():
        return Built(module, version, source, binary)
    env = _environment()
    if shutil.which("go", path=env["PATH"]) is None:
        raise BuildUnavailable("no Go toolchain on PATH (or in /usr/local/go/bin)")
    started = time.monotonic()
    downloaded = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                                capture_output=True, text=True, env=env, timeout=600,
                                check=False, cwd=folder.parent if folder.parent.exists()
                                else None)
    try:
        info = json.loads(downloaded.stdout or "{}")
    except ValueError:
        info = {}
    if downloaded.returncode != 0 or not info.get("Dir"):
        raise BuildUnavailable(f"the module proxy did not serve {module}@{version}: "
                               f"{info.get('Error') or downloaded.stderr.strip()[-300:]}")
    if source.exists():
        shutil.rmtree(source)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(info["Dir"], source)
    for path in source.rglob("*"):  # the cache's copy is read-only
        path.chmod(path.stat().st_mode | 0o200)
    source.chmod(source.stat().st_mode | 0o200)
    for old, new in replaces:
        subprocess.run(["go", "mod", "edit", f"-replace={old}={new}"], cwd=source, env=env,
                       check=True, capture_output=True, timeout=60)
    return _compile(module, version, source, binary, package, main, started)


def build_from_git(repository: Path, module: str, version: str, package: str = ".",
                   main: Path | None = None) -> Built:
    """The operator built from the tag ``version`` of a git clone (``repository``: its git
    directory), for a module the proxy cannot serve (its go.mod names its module other
    than its repository: ``module redis-operator``); cached as :func:`build` caches, its
    dependencies from the module proxy.  :class:`BuildUnavailable` says why not."""
    folder = cache_root() / f"{module}@{version}"
    binary = folder / (f"operator-{main.stem}" if main else "operator")
    source = folder / "source"
    if binary.exists() and source.exists():
        return Built(module, version, source, binary)
    if shutil.which("go", path=_environment()["PATH"]) is None:
        raise BuildUnavailable("no Go toolchain on PATH (or in /usr/local/go/bin)")
    started = time.monotonic()
    archive = subprocess.run(["git", f"--git-dir={repository}", "archive", version],
                             capture_output=True, timeout=300, check=False)
    if archive.returncode != 0:
        raise BuildUnavailable(f"{repository} gave no {version} of {module}: "
                               f"{archive.stderr.decode(errors='replace').strip()[-300:]}")
    if source.exists():
        shutil.rmtree(source)
    source.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(source, filter="data")
    return _compile(module, version, source, binary,
                    f"./{OUR_MAIN}" if main else package, main, started)


def _compile(module: str, version: str, source: Path, binary: Path, package: str,
             main: Path | None, started: float) -> Built:
    env = _environment()
    if main:
        (source / OUR_MAIN).mkdir(exist_ok=True)
        shutil.copy(main, source / OUR_MAIN / "main.go")
    built = subprocess.run(["go", "build", "-o", str(binary), package], cwd=source,
                           capture_output=True, text=True, env=env, timeout=BUILD_TIMEOUT,
                           check=False)
    if built.returncode != 0:
        go = subprocess.run(["go", "version"], capture_output=True, text=True, env=env,
                            check=False).stdout.strip()
        raise BuildUnavailable(f"{module}@{version} did not build with {go}: "
                               f"{built.stderr.strip()[-800:]}")
    return Built(module, version, source, binary, time.monotonic() - started)
