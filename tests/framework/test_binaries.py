"""Finding and obtaining control-plane binaries: index downloads, resolution order, the cache.

Downloads run against a real HTTP server on loopback that serves an index and
archives made here; the archives hold small scripts standing in for the
binaries under a version no real release has (1.36.99), so nothing here is
confused with the real cache.  The real build is checked at the end.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
import sys
import tarfile
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from framework_helpers import unused_port

from envtest import (
    BinaryNotFoundError,
    BuildError,
    CacheError,
    DownloadError,
    Version,
    VersionError,
    VersionSpec,
)
from envtest.binaries import BinaryStore, Resolver, platform_suffix

FAKE_VERSION = "1.36.99"


def fake_binary(name: str) -> bytes:
    return f"#!/bin/sh\necho '{name} fake {FAKE_VERSION}'\n".encode()


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

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def publish(self, version: str, files: dict[str, bytes], sha512: str | None = None) -> str:
        name = f"envtest-v{version}-{platform_suffix()}.tar.gz"
        archive = make_archive(files)
        self.files[f"/{name}"] = archive
        index = {"releases": {f"v{version}": {name: {
            "hash": sha512 or hashlib.sha512(archive).hexdigest(),
            "selfLink": f"{self.url}/{name}"}}}}
        self.files["/index.yaml"] = yaml.safe_dump(index).encode()
        return f"/{name}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def index_server() -> Iterator[IndexServer]:
    server = IndexServer()
    yield server
    server.close()


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "store"


CLEAN_ENV = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}


def resolver(store_root: Path, version: str = FAKE_VERSION, **options: object) -> Resolver:
    return Resolver(version, bin_dir=store_root, environ=options.pop("environ", CLEAN_ENV),
                    **options)  # type: ignore[arg-type]


GOOD_FILES = {"kube-apiserver": fake_binary("kube-apiserver"), "etcd": fake_binary("etcd"),
              "kubectl": fake_binary("kubectl")}


# -- downloads ---------------------------------------------------------------------


def test_download_with_good_hash_installs_read_only_flat_dir(index_server: IndexServer,
                                                            store_root: Path) -> None:
    archive_path = index_server.publish(FAKE_VERSION, GOOD_FILES)
    resolution = resolver(store_root, index_url=f"{index_server.url}/index.yaml").resolve()

    directory = store_root / "k8s" / f"{FAKE_VERSION}-{platform_suffix()}"
    assert resolution.binaries.directory == directory
    assert sorted(p.name for p in directory.iterdir() if not p.name.startswith(".")) == [
        "etcd", "kube-apiserver", "kubectl"]
    assert not directory.stat().st_mode & stat.S_IWUSR, "the version dir must be read-only"
    out = subprocess.run([resolution.binaries.kube_apiserver], capture_output=True, text=True)
    assert out.stdout.strip() == f"kube-apiserver fake {FAKE_VERSION}"
    assert index_server.hits[archive_path] == 1
    assert [s.source for s in resolution.steps] == ["cache", "download"]


def test_download_with_bad_hash_installs_nothing(index_server: IndexServer,
                                                 store_root: Path) -> None:
    index_server.publish(FAKE_VERSION, GOOD_FILES, sha512="ab" * 64)
    with pytest.raises(BuildError) as failure:  # the download fails, then so does the build
        resolver(store_root, index_url=f"{index_server.url}/index.yaml",
                 environ={"PATH": "/nonexistent"}).resolve()
    message = str(failure.value)
    assert "sha512 mismatch" in message and "nothing was installed" in message
    assert "'go' command is not on PATH" in message
    assert BinaryStore(store_root).installed() == []
    leftovers = [p.name for p in (store_root / "k8s").iterdir()]
    assert leftovers == [], f"staging dirs left behind: {leftovers}"


def test_index_404_gives_a_clear_error(index_server: IndexServer, store_root: Path) -> None:
    with pytest.raises(BuildError) as failure:
        resolver(store_root, index_url=f"{index_server.url}/missing.yaml",
                 environ={"PATH": "/nonexistent"}).resolve()
    assert f"release index {index_server.url}/missing.yaml answered HTTP 404" in str(
        failure.value)


def test_unreachable_index_gives_a_clear_error(store_root: Path) -> None:
    port = unused_port()
    with pytest.raises(DownloadError) as failure:
        Resolver("1.36", bin_dir=store_root, index_url=f"http://127.0.0.1:{port}/index.yaml",
                 environ=CLEAN_ENV).published_versions()
    assert "is unreachable" in str(failure.value) and "--index" in str(failure.value)


@pytest.mark.slow
def test_index_without_the_version_falls_through_to_the_go_build(
        index_server: IndexServer, store_root: Path, default_binaries_version: Version) -> None:
    """The next source after a failed download is the Go build (fast: Go's build cache is warm
    after `make test` built the default version)."""
    index_server.publish(FAKE_VERSION, GOOD_FILES)  # the index lacks the default version
    resolution = Resolver(str(default_binaries_version), bin_dir=store_root,
                          index_url=f"{index_server.url}/index.yaml").resolve()
    outcomes = {s.source: s.outcome for s in resolution.steps}
    assert "does not list" in outcomes["download"]
    assert "built from Go modules" in outcomes["build"]
    version = subprocess.run([resolution.binaries.kube_apiserver, "--version"],
                             capture_output=True, text=True).stdout
    assert version.strip() == f"Kubernetes {default_binaries_version.tag}"


# -- the cache -----------------------------------------------------------------------


def test_second_resolution_uses_the_cache(index_server: IndexServer, store_root: Path) -> None:
    archive_path = index_server.publish(FAKE_VERSION, GOOD_FILES)
    url = f"{index_server.url}/index.yaml"
    first = resolver(store_root, index_url=url).resolve().binaries
    second = resolver(store_root, index_url=url).resolve()
    assert second.binaries.paths == first.paths
    assert [s.source for s in second.steps] == ["cache"]
    assert index_server.hits[archive_path] == 1


def test_corrupt_entry_is_detected_and_obtained_again(index_server: IndexServer,
                                                      store_root: Path) -> None:
    archive_path = index_server.publish(FAKE_VERSION, GOOD_FILES)
    url = f"{index_server.url}/index.yaml"
    binaries = resolver(store_root, index_url=url).resolve().binaries
    directory = binaries.kube_apiserver.parent
    directory.chmod(0o755)
    binaries.kube_apiserver.chmod(0o755)
    binaries.kube_apiserver.write_bytes(b"#!/bin/sh\n")  # truncated, as by a full disk

    resolution = resolver(store_root, index_url=url).resolve()
    assert "has size" in resolution.steps[0].outcome
    assert resolution.binaries.kube_apiserver.read_bytes() == GOOD_FILES["kube-apiserver"]
    assert index_server.hits[archive_path] == 2


def test_installed_only_never_obtains(index_server: IndexServer, store_root: Path) -> None:
    index_server.publish(FAKE_VERSION, GOOD_FILES)
    with pytest.raises(BinaryNotFoundError) as failure:
        resolver(store_root, index_url=f"{index_server.url}/index.yaml",
                 installed_only=True).resolve()
    assert "installed-only" in str(failure.value) and "envtest use" in str(failure.value)
    assert sum(index_server.hits.values()) == 0


def test_read_only_cache_root_is_reported(index_server: IndexServer, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permission bits; a file where the cache dir should be is refused by all
        root = tmp_path / "not-a-dir"
        root.write_text("")
    else:
        root = tmp_path / "ro"
        root.mkdir(mode=0o555)
    index_server.publish(FAKE_VERSION, GOOD_FILES)
    with pytest.raises(CacheError) as failure:
        resolver(root, index_url=f"{index_server.url}/index.yaml").resolve()
    assert "is not writable" in str(failure.value) and "--bin-dir" in str(failure.value)


def test_concurrent_use_obtains_once(index_server: IndexServer, store_root: Path) -> None:
    archive_path = index_server.publish(FAKE_VERSION, GOOD_FILES)
    command = [sys.executable, "-m", "envtest.cli", "use", FAKE_VERSION, "-p", "path",
               "--bin-dir", str(store_root), "--index", f"{index_server.url}/index.yaml"]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0, 0], outputs
    paths = {out.strip() for out, _ in outputs}
    assert paths == {str(store_root / "k8s" / f"{FAKE_VERSION}-{platform_suffix()}")}
    assert index_server.hits[archive_path] == 1


# -- resolution order -------------------------------------------------------------------


def _flat_dir(path: Path, label: str) -> Path:
    path.mkdir(parents=True)
    for name in ("kube-apiserver", "etcd"):
        (path / name).write_bytes(f"#!/bin/sh\necho {label}\n".encode())
        (path / name).chmod(0o755)
    return path


def test_resolution_order(tmp_path: Path, index_server: IndexServer, store_root: Path) -> None:
    index_server.publish(FAKE_VERSION, GOOD_FILES)
    url = f"{index_server.url}/index.yaml"
    cached = resolver(store_root, index_url=url).resolve().binaries
    assets = _flat_dir(tmp_path / "assets", "assets")
    bin_dir = _flat_dir(tmp_path / "bindir", "bindir")
    single = _flat_dir(tmp_path / "single", "single") / "etcd"

    def resolve(environ: dict[str, str], flat_bin_dir: Path | None = None) -> dict[str, Path]:
        # --bin-dir is both a flat dir and the cache root; use separate runs for each role
        r = Resolver(FAKE_VERSION, bin_dir=flat_bin_dir or store_root, index_url=url,
                     environ=CLEAN_ENV | environ)
        return dict(r.resolve().binaries.paths)

    assert resolve({}) == dict(cached.paths)  # 4. the cache
    assert resolve({}, bin_dir)["kube-apiserver"] == bin_dir / "kube-apiserver"  # 3.
    with_assets = resolve({"KUBEBUILDER_ASSETS": str(assets)}, bin_dir)  # 2. beats 3.
    assert with_assets == {"kube-apiserver": assets / "kube-apiserver", "etcd": assets / "etcd"}
    per_binary = resolve({"KUBEBUILDER_ASSETS": str(assets), "TEST_ASSET_ETCD": str(single)})
    assert per_binary == {"kube-apiserver": assets / "kube-apiserver", "etcd": single}  # 1.


def test_test_asset_that_is_not_executable_is_named(tmp_path: Path, store_root: Path) -> None:
    broken = tmp_path / "etcd"
    broken.write_text("not a program")
    with pytest.raises(BinaryNotFoundError) as failure:
        resolver(store_root, environ=CLEAN_ENV | {"TEST_ASSET_ETCD": str(broken)}).resolve()
    assert f"TEST_ASSET_ETCD={broken} is not an executable file" in str(failure.value)


def test_cli_overview_shows_each_step(index_server: IndexServer, store_root: Path) -> None:
    index_server.publish(FAKE_VERSION, GOOD_FILES)
    out = subprocess.run(
        [sys.executable, "-m", "envtest.cli", "use", FAKE_VERSION, "-p", "overview",
         "--bin-dir", str(store_root), "--index", f"{index_server.url}/index.yaml"],
        capture_output=True, text=True, env=CLEAN_ENV | {"COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "download" in out.stdout and "kube-apiserver:" in out.stdout


# -- versions ----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "minor", "patch"), [
    ("1.37", 37, None), ("1.37.2", 37, 2), ("v1.37.2", 37, 2), ("latest", None, None),
    (None, 37, None)])
def test_version_specs(text: str | None, minor: int | None, patch: int | None) -> None:
    spec = VersionSpec.parse(text)
    assert (spec.minor, spec.patch) == (minor, patch)


def test_minor_resolves_to_its_newest_patch() -> None:
    available = [Version.parse(v) for v in ("1.36.1", "1.36.3", "1.37.0", "1.37.2", "1.38.0")]
    assert str(VersionSpec.parse("1.36").pick(available, "test")) == "1.36.3"
    assert str(VersionSpec.parse("latest").pick(available, "test")) == "1.37.2"


def test_unsupported_and_unknown_versions_list_what_exists() -> None:
    with pytest.raises(VersionError, match="supported minors are 1.34, 1.35, 1.36, 1.37"):
        VersionSpec.parse("1.29")
    with pytest.raises(VersionError, match="cannot read Kubernetes version"):
        VersionSpec.parse("one.two")
    available = [Version.parse("1.36.1"), Version.parse("1.37.2")]
    with pytest.raises(VersionError, match=r"no Kubernetes release matches 1\.36\.7.*"
                                           r"available: 1\.36\.1, 1\.37\.2"):
        VersionSpec.parse("1.36.7").pick(available, "the test list")


def test_published_versions_come_from_the_go_module_proxy(store_root: Path) -> None:
    versions = Resolver("1.37", bin_dir=store_root).published_versions()
    assert any(v.minor == 37 for v in versions)
    assert all(v.major == 1 for v in versions)


def test_missing_go_is_reported_with_alternatives(store_root: Path) -> None:
    with pytest.raises(BuildError) as failure:
        Resolver("1.36.3", bin_dir=store_root, environ={"PATH": "/nonexistent"}).resolve()
    message = str(failure.value)
    assert "'go' command is not on PATH" in message and "KUBEBUILDER_ASSETS" in message


# -- the real binaries ----------------------------------------------------------------------


def test_second_use_is_fast(default_binaries_version: Version) -> None:
    import time

    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "envtest.cli", "use",
                          default_binaries_version.minor_str, "-p", "path"],
                         capture_output=True, text=True)
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip(), "kube-apiserver").exists()
    assert elapsed < 1.0, f"a cached `envtest use` took {elapsed:.2f} s"


def test_cli_list_and_cleanup(index_server: IndexServer, store_root: Path) -> None:
    index_server.publish(FAKE_VERSION, GOOD_FILES)
    url = f"{index_server.url}/index.yaml"
    cli = [sys.executable, "-m", "envtest.cli"]
    env = CLEAN_ENV | {"COLUMNS": "200"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], capture_output=True, text=True, env=env)

    listed = run("list", "1.36", "--bin-dir", str(store_root), "--index", url)
    assert listed.returncode == 0, listed.stderr
    assert FAKE_VERSION in listed.stdout and "obtainable" in listed.stdout
    assert run("use", FAKE_VERSION, "--bin-dir", str(store_root), "--index", url).returncode == 0
    listed = run("list", "1.36", "--bin-dir", str(store_root), "--index", url)
    assert "installed" in listed.stdout and "obtainable" not in listed.stdout

    kept = run("cleanup", "--bin-dir", str(store_root))  # no version named: nothing installed goes
    assert "name versions (or 'all')" in kept.stdout
    assert BinaryStore(store_root).installed() != []
    removed = run("cleanup", FAKE_VERSION, "--bin-dir", str(store_root))
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert BinaryStore(store_root).installed() == []
    assert not (store_root / "k8s" / f"{FAKE_VERSION}-{platform_suffix()}").exists()
