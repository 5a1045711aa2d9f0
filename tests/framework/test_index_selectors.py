"""Downloads for 1.23 and later with setup-envtest's selectors, end to end.

A loopback index holds small archives for several minors (1.23 to 1.31);
each selector is resolved, the archive it names downloaded, verified and
installed, and the installed script says which release it came from.  The Go
module proxy's list is a file in the store's state directory (as a real run
leaves it), so the tests can tell a download from a build without running one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from index_helpers import IndexServer

from envtest import Version, VersionError
from envtest.binaries import Resolver

INDEX_RELEASES = ("1.23.5", "1.27.1", "1.28.0", "1.28.3", "1.28.5", "1.29.2", "1.30.0",
                  "1.31.4")


def script(name: str, version: str) -> bytes:
    return f"#!/bin/sh\necho '{name} {version}'\n".encode()


@pytest.fixture
def index_url() -> Iterator[str]:
    server = IndexServer()
    for version in INDEX_RELEASES:
        server.publish(version, {name: script(name, version)
                                 for name in ("kube-apiserver", "etcd", "kubectl")})
    yield f"{server.url}/index.yaml"
    server.close()


def resolver(store: Path, spec: str, index_url: str, **options: object) -> Resolver:
    # No go on PATH: the index is the only source unless a test writes the Go proxy's list.
    return Resolver(spec, bin_dir=store, index_url=index_url, components=("kubectl",),
                    environ={"PATH": "/nonexistent", "HOME": str(store)},
                    **options)  # type: ignore[arg-type]


def go_proxy_lists(store: Path, *versions: str) -> None:
    """What 'go list -m -versions k8s.io/kubernetes' answered, as the resolver caches it."""
    state = Resolver("1.37", bin_dir=store, environ={"PATH": "/nonexistent"}).store.state_dir
    state.mkdir(parents=True, exist_ok=True)
    (state / "published-versions.json").write_text(json.dumps(
        {"at": time.time(), "versions": [f"v{v}" for v in versions]}))


@pytest.mark.parametrize(("selector", "release"), [
    ("1.28", "1.28.5"), ("~1.28.3", "1.28.5"), ("1.28.3", "1.28.3"), ("<1.30", "1.29.2"),
    ("<=1.28.3", "1.28.3"), ("latest", "1.31.4"), ("1.23", "1.23.5"), ("v1.27.1", "1.27.1"),
])
def test_each_selector_downloads_the_release_it_means(tmp_path: Path, index_url: str,
                                                      selector: str, release: str) -> None:
    binaries = resolver(tmp_path, selector, index_url).resolve().binaries
    assert binaries.version == Version.parse(release)
    for name in ("kube-apiserver", "etcd", "kubectl"):
        ran = subprocess.run([str(binaries.paths[name])], capture_output=True, text=True,
                             check=True)
        assert ran.stdout.strip() == f"{name} {release}"


def test_the_index_patch_is_preferred_to_a_newer_one_only_a_build_gives(
        tmp_path: Path, index_url: str) -> None:
    go_proxy_lists(tmp_path, "1.30.0", "1.30.9", "1.32.1")
    # 1.30: the index has 1.30.0, the Go proxy 1.30.9 (a build of minutes): the download.
    assert resolver(tmp_path, "1.30", index_url).resolve_version() == Version(1, 30, 0)
    # A minor the index lacks comes from the Go proxy; so does the newest, for latest.
    assert resolver(tmp_path, "1.32", index_url).resolve_version() == Version(1, 32, 1)
    assert resolver(tmp_path, "latest", index_url).resolve_version() == Version(1, 32, 1)


def test_the_cli_downloads_by_selector_and_lists_what_can_be_had(tmp_path: Path,
                                                                 index_url: str) -> None:
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    cli = [sys.executable, "-m", "envtest.cli"]
    used = subprocess.run([*cli, "use", "~1.28.3", "--bin-dir", str(tmp_path), "--index",
                           index_url, "-p", "path"], capture_output=True, text=True, env=env)
    assert used.returncode == 0, used.stderr
    assert Path(used.stdout.strip()).name.startswith("1.28.5-")
    listed = subprocess.run([*cli, "list", "--bin-dir", str(tmp_path), "--index", index_url],
                            capture_output=True, text=True, env=env)
    rows = {line.split("│")[1].strip(): line for line in listed.stdout.splitlines()
            if line.count("│") > 2}
    assert "installed" in rows["1.28.5"] and "downloadable" in rows["1.23.5"]
    assert set(rows) - {""} == set(INDEX_RELEASES)


@pytest.mark.parametrize(("selector", "says"), [
    ("1.22", r"Kubernetes 1\.22 cannot be obtained: no release of it can be had here\. "
             r"downloadable from the release index: 1\.23\.5 to 1\.31\.4; buildable from the "
             r"Go module proxy: 1\.30\.0 to 1\.32\.1\. Get one with 'envtest use 1\.32'"),
    ("1.28.4", r"Kubernetes 1\.28\.4 cannot be obtained: releases before 1\.29 are not built "
               r"here .* the release index does not list it .* Get one with 'envtest use "
               r"1\.28'"),
    ("1.30.7", r"Kubernetes 1\.30\.7 cannot be obtained: it is not a published Kubernetes "
               r"release\. .*buildable from the Go module proxy: 1\.30\.0 to 1\.32\.1\. Get one "
               r"with 'envtest use 1\.30'"),
])
def test_an_unobtainable_version_names_what_can_be_had_and_the_command(
        tmp_path: Path, index_url: str, selector: str, says: str) -> None:
    go_proxy_lists(tmp_path, "1.13.0", "1.30.0", "1.32.1")
    with pytest.raises(VersionError, match=says):
        resolver(tmp_path, selector, index_url).resolve()
    # Nothing was half-installed on the way.
    assert not list((tmp_path / "k8s").glob(f"{selector}*"))
