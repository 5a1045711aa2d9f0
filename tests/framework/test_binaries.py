"""Finding and obtaining control-plane binaries: index downloads, resolution order, the cache.

Downloads run against a real HTTP server on loopback that serves an index and
archives made here; the archives hold small scripts standing in for the
binaries under a version no real release has (1.36.99), so nothing here is
confused with the real cache.  The real build is checked at the end.
"""

from __future__ import annotations

import io
import os
import resource
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import kubernetes
import pytest
from framework_helpers import unused_port
from index_helpers import IndexServer, make_archive

from envtest import (
    BinaryNotFoundError,
    BuildError,
    CacheError,
    ConfigurationError,
    ControlPlane,
    DownloadError,
    Version,
    VersionError,
    VersionSpec,
)
from envtest.binaries import BinaryStore, Resolver, platform_suffix

FAKE_VERSION = "1.36.99"


def fake_binary(name: str) -> bytes:
    return f"#!/bin/sh\necho '{name} fake {FAKE_VERSION}'\n".encode()


@pytest.fixture
def index_server() -> Iterator[IndexServer]:
    server = IndexServer()
    yield server
    server.close()


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "store"


#: Tests never reach the real index: a refused loopback port stands in for "unreachable".
UNREACHABLE_INDEX = "http://127.0.0.1:9/envtest-releases.yaml"
CLEAN_ENV = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
             "ENVTEST_INDEX_URL": UNREACHABLE_INDEX}


class NoteTaker:
    """A Progress that keeps the notes (the one-line explanations of each choice)."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes

    @contextmanager
    def step(self, title: str) -> Iterator[None]:
        yield

    def note(self, message: str) -> None:
        self.notes.append(message)


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


@pytest.mark.parametrize("index", ["refused", "no such host"])
def test_an_unreachable_index_costs_under_a_second_and_says_so(store_root: Path,
                                                              index: str) -> None:
    url = (f"http://127.0.0.1:{unused_port()}/index.yaml" if index == "refused"
           else "http://envtest-index.invalid/index.yaml")
    notes: list[str] = []
    started = time.monotonic()
    with pytest.raises(BuildError) as failure:  # ... then the build, without go here, fails
        resolver(store_root, index_url=url, environ={"PATH": "/nonexistent"},
                 progress=NoteTaker(notes)).resolve()
    assert time.monotonic() - started < 1.0
    message = str(failure.value)
    assert "is unreachable" in message and "'go' command is not on PATH" in message
    assert "envtest sideload" in message, "the error names the other ways to get binaries"
    assert [n for n in notes if "unreachable" in n and "Go module proxy" in n], notes


@pytest.mark.slow
@pytest.mark.reliability(reason="links kube-apiserver and etcd with go build however warm Go's "
                         "cache is: 10 CPU s, the most of any one check in make test; "
                         "make test-reliability (and so .ci/run) runs it")
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


def test_a_missing_scheduler_says_how_to_get_it(store_root: Path) -> None:
    with pytest.raises(BinaryNotFoundError) as failure:
        resolver(store_root, installed_only=True,
                 components=("kube-scheduler",)).resolve()
    assert f"envtest use {FAKE_VERSION} --with kube-scheduler" in str(failure.value)


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
    assert "downloaded from the release index" in out.stderr


# -- versions ----------------------------------------------------------------------------


def _versions(*texts: str) -> list[Version]:
    return [Version.parse(t) for t in texts]


AVAILABLE = _versions("1.33.9", "1.36.1", "1.36.3", "1.37.0", "1.37.2", "1.38.0")


@pytest.mark.parametrize(("text", "picked"), [
    ("1.36", "1.36.3"), ("1.36.x", "1.36.3"), ("~1.36", "1.36.3"), ("~1.36.2", "1.36.3"),
    ("1.36.1", "1.36.1"), ("v1.37.2", "1.37.2"), ("<1.37", "1.36.3"), ("<1.37.2", "1.37.0"),
    ("<=1.37", "1.37.2"), ("<=1.36.1", "1.36.1"), ("latest", "1.38.0"), ("1.33", "1.33.9"),
    ("1.36!", "1.36.3")])
def test_version_selectors_as_setup_envtest_has_them(text: str, picked: str) -> None:
    assert str(VersionSpec.parse(text).pick(AVAILABLE, "test")) == picked


def test_exact_versions_need_no_lookup_and_bang_forces_a_remote_check() -> None:
    assert VersionSpec.parse("1.37.2").exact == Version(1, 37, 2)
    assert VersionSpec.parse("1.37").exact is None and VersionSpec.parse("1.37").minor == 37
    assert VersionSpec.parse("1.37!").force_remote and not VersionSpec.parse("1.37").force_remote
    assert str(VersionSpec.parse(None)) == "1.37"  # the default
    assert str(VersionSpec.parse("1.29")) == "1.29"  # any published version, not only tested


def test_unreadable_and_unmatched_versions_say_what_exists() -> None:
    with pytest.raises(VersionError, match="cannot read Kubernetes version 'one.two'.*~1.37.2"):
        VersionSpec.parse("one.two")
    with pytest.raises(VersionError, match=r"no Kubernetes release matches 1\.36\.7.*"
                                           r"available: 1\.33\.9, 1\.36\.1"):
        VersionSpec.parse("1.36.7").pick(AVAILABLE, "the test list")


def test_published_versions_come_from_the_go_module_proxy(store_root: Path) -> None:
    versions = Resolver("1.37", bin_dir=store_root, environ=os.environ | {
        "ENVTEST_INDEX_URL": UNREACHABLE_INDEX}).published_versions()
    assert any(v.minor == 37 for v in versions)
    assert all(v.major == 1 and sources == {"build"} for v, sources in versions.items())


def test_missing_go_is_reported_with_alternatives(store_root: Path) -> None:
    with pytest.raises(BuildError) as failure:
        Resolver("1.36.3", bin_dir=store_root, environ={"PATH": "/nonexistent"}).resolve()
    message = str(failure.value)
    assert "'go' command is not on PATH" in message and "KUBEBUILDER_ASSETS" in message


# -- the real binaries ----------------------------------------------------------------------


def test_second_use_is_fast(default_binaries_version: Version) -> None:
    """A warm `envtest use` imports no client, asks no network: a fraction of a second of CPU.

    CPU time, not wall time: under a full ``make test`` on two cores the same command took
    0.56 s of wall time at best of three (0.1 s on an idle machine), its CPU time stays."""
    cpu = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "envtest.cli", "use",
                              default_binaries_version.minor_str, "-p", "path"],
                             capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        assert out.returncode == 0, out.stderr
        assert Path(out.stdout.strip(), "kube-apiserver").exists()
        imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()}
        heavy = sorted(m for m in imported if m.split(".")[0] in ("kubernetes", "httpx",
                                                                   "aiohttp", "urllib3"))
        assert not heavy, f"a cached `envtest use` imported {heavy[:5]}"
    assert min(cpu) < 0.5, f"a cached `envtest use` took {cpu} s of CPU"


def test_cli_list_and_cleanup(index_server: IndexServer, store_root: Path) -> None:
    index_server.publish(FAKE_VERSION, GOOD_FILES)
    url = f"{index_server.url}/index.yaml"
    cli = [sys.executable, "-m", "envtest.cli"]
    env = CLEAN_ENV | {"COLUMNS": "200"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], capture_output=True, text=True, env=env)

    listed = run("list", "1.36", "--bin-dir", str(store_root), "--index", url)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("│")[1].strip(): line for line in listed.stdout.splitlines()
            if line.count("│") > 2}
    assert "downloadable" in rows[FAKE_VERSION]  # from the index
    assert [v for v, row in rows.items() if "buildable" in row], "the Go proxy's versions"
    assert run("use", FAKE_VERSION, "--bin-dir", str(store_root), "--index", url).returncode == 0
    listed = run("list", "1.36", "--bin-dir", str(store_root), "--index", url)
    rows = {line.split("│")[1].strip(): line for line in listed.stdout.splitlines()
            if line.count("│") > 2}
    assert "installed" in rows[FAKE_VERSION] and "downloadable" not in rows[FAKE_VERSION]

    kept = run("cleanup", "--bin-dir", str(store_root))  # no version named: nothing installed goes
    assert "name versions (or 'all')" in kept.stdout
    assert BinaryStore(store_root).installed() != []
    removed = run("cleanup", FAKE_VERSION, "--bin-dir", str(store_root))
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert BinaryStore(store_root).installed() == []
    assert not (store_root / "k8s" / f"{FAKE_VERSION}-{platform_suffix()}").exists()


# -- the index: bad input, offline, platforms ---------------------------------------------


def test_a_truncated_archive_never_lands_in_the_cache(index_server: IndexServer,
                                                     store_root: Path) -> None:
    archive = make_archive(GOOD_FILES)
    truncated = archive[: len(archive) // 2]
    # The index's hash even matches the truncated bytes: the archive itself is unreadable.
    index_server.publish(FAKE_VERSION, archive=truncated)
    with pytest.raises(BuildError) as failure:
        resolver(store_root, index_url=f"{index_server.url}/index.yaml",
                 environ={"PATH": "/nonexistent"}).resolve()
    assert "is not a readable tar or tar.gz archive" in str(failure.value)
    assert BinaryStore(store_root).installed() == []
    assert [p.name for p in (store_root / "k8s").iterdir()] == []


@pytest.mark.parametrize(("body", "message"), [
    (b"releases: [unclosed", "is not valid YAML"),
    (b"just: a mapping\n", "not an envtest release index")])
def test_an_index_that_is_not_one_is_named(index_server: IndexServer, store_root: Path,
                                          body: bytes, message: str) -> None:
    """A misconfigured index fails at once, naming it (no five-minute build instead)."""
    index_server.files["/index.yaml"] = body
    with pytest.raises(DownloadError) as failure:
        resolver(store_root, index_url=f"{index_server.url}/index.yaml",
                 environ={"PATH": "/nonexistent"}).resolve()
    assert message in str(failure.value) and "--index" in str(failure.value)


def test_offline_asks_no_index_and_no_proxy(index_server: IndexServer, store_root: Path) -> None:
    index_server.publish(FAKE_VERSION, GOOD_FILES)
    url = f"{index_server.url}/index.yaml"
    with pytest.raises(BuildError) as failure:
        resolver(store_root, index_url=url, offline=True,
                 environ={"PATH": "/nonexistent"}).resolve()
    assert "offline" in str(failure.value)
    with pytest.raises(VersionError, match="offline"):
        resolver(store_root, "1.36", index_url=url, offline=True).resolve()
    assert sum(index_server.hits.values()) == 0
    resolver(store_root, index_url=url).resolve()  # online, it downloads
    binaries = resolver(store_root, "1.36", index_url=url,
                        environ=CLEAN_ENV | {"ENVTEST_OFFLINE": "1"}).resolve().binaries
    assert str(binaries.version) == FAKE_VERSION  # offline, the cache still serves


def test_a_trailing_bang_asks_the_remote_sources_for_a_newer_version(
        index_server: IndexServer, store_root: Path) -> None:
    index_server.publish(FAKE_VERSION, GOOD_FILES)
    url = f"{index_server.url}/index.yaml"
    resolver(store_root, index_url=url).resolve()
    newer = "1.36.100"
    index_server.publish(newer, GOOD_FILES)
    settled = resolver(store_root, "~1.36.99", index_url=url).resolve()
    assert str(settled.binaries.version) == FAKE_VERSION, "an installed match is enough"
    assert any("add '!'" in s.outcome for s in settled.steps)
    forced = resolver(store_root, "~1.36.99!", index_url=url).resolve().binaries
    assert str(forced.version) == newer


def test_binaries_for_another_platform_are_fetched_into_their_own_entry(
        index_server: IndexServer, store_root: Path, tmp_path: Path) -> None:
    index_server.publish(FAKE_VERSION, GOOD_FILES, suffix="darwin-arm64")
    # This machine's own assets are not taken for another platform's.
    assets = tmp_path / "assets"
    assets.mkdir()
    for name in ("kube-apiserver", "etcd"):
        (assets / name).write_bytes(b"#!/bin/sh\n")
        (assets / name).chmod(0o755)
    binaries = resolver(store_root, index_url=f"{index_server.url}/index.yaml",
                        os_name="darwin", arch="arm64",
                        environ=CLEAN_ENV | {"KUBEBUILDER_ASSETS": str(assets)}).resolve().binaries
    assert binaries.directory == store_root / "k8s" / f"{FAKE_VERSION}-darwin-arm64"
    with pytest.raises(ConfigurationError, match="unknown architecture 'risc'.*amd64, arm64"):
        resolver(store_root, arch="risc")


def test_sideload_from_a_file_and_from_stdin(store_root: Path, tmp_path: Path) -> None:
    archive = tmp_path / f"envtest-v{FAKE_VERSION}-{platform_suffix()}.tar.gz"
    archive.write_bytes(make_archive(GOOD_FILES))
    cli = [sys.executable, "-m", "envtest.cli", "sideload", FAKE_VERSION]
    loaded = subprocess.run([*cli, str(archive), "--bin-dir", str(store_root)],
                            capture_output=True, text=True, env=CLEAN_ENV)
    assert loaded.returncode == 0, loaded.stderr
    entry = store_root / "k8s" / f"{FAKE_VERSION}-{platform_suffix()}"
    assert loaded.stdout.strip() == str(entry)
    assert resolver(store_root, installed_only=True).resolve().binaries.directory == entry

    other = tmp_path / "other-store"
    with open(archive, "rb") as stdin:
        piped = subprocess.run([*cli, "-", "--bin-dir", str(other)], stdin=stdin,
                               capture_output=True, text=True, env=CLEAN_ENV)
    assert piped.returncode == 0, piped.stderr
    assert BinaryStore(other).installed()[0].components == ("kube-apiserver", "etcd", "kubectl")


def test_sideload_of_an_archive_without_the_binaries_is_refused(store_root: Path,
                                                               tmp_path: Path) -> None:
    archive = tmp_path / "wrong.tar.gz"
    archive.write_bytes(make_archive({"kubectl": fake_binary("kubectl")}))
    refused = subprocess.run([sys.executable, "-m", "envtest.cli", "sideload", FAKE_VERSION,
                              str(archive), "--bin-dir", str(store_root)],
                             capture_output=True, text=True, env=CLEAN_ENV)
    assert refused.returncode == 1
    assert "lacks kube-apiserver, etcd" in refused.stderr and "envtest archive" in refused.stderr
    assert BinaryStore(store_root).installed() == []
    missing = subprocess.run([sys.executable, "-m", "envtest.cli", "sideload", FAKE_VERSION,
                              str(tmp_path / "nope.tar.gz"), "--bin-dir", str(store_root)],
                             capture_output=True, text=True, env=CLEAN_ENV)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    garbage = tmp_path / "notanarchive"
    garbage.write_text("not an archive\n")
    unreadable = subprocess.run([sys.executable, "-m", "envtest.cli", "sideload", FAKE_VERSION,
                                 str(garbage), "--bin-dir", str(store_root)],
                                capture_output=True, text=True, env=CLEAN_ENV)
    # tarfile's own list (a line per compression it tried) was five lines: now one.
    assert unreadable.returncode == 1 and len(unreadable.stderr.strip().splitlines()) == 1
    assert "is not a readable tar or tar.gz archive" in unreadable.stderr, unreadable.stderr
    assert BinaryStore(store_root).installed() == []


def test_a_downloaded_real_release_runs_a_control_plane(index_server: IndexServer,
                                                       store_root: Path,
                                                       default_binaries_version: Version) -> None:
    """Archives in the official layout, made from the real binaries: the download lands in
    setup-envtest's layout (flat, read-only), and a control plane starts from it."""
    real = Resolver(str(default_binaries_version), installed_only=True).resolve().binaries
    buffer = io.BytesIO()
    # A gzip of stored blocks: what is checked is the layout, the digest and the unpacking;
    # deflating ~120 MB of binaries cost 2.4 CPU s of the test's 6.3 here.
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=0) as tar:
        for name in ("kube-apiserver", "etcd"):
            tar.add(real[name], arcname=f"controller-tools/envtest/{name}")
    index_server.publish(str(default_binaries_version), archive=buffer.getvalue())
    started = time.monotonic()
    downloaded = Resolver(str(default_binaries_version), bin_dir=store_root,
                          index_url=f"{index_server.url}/index.yaml",
                          environ=CLEAN_ENV).resolve().binaries
    seconds = time.monotonic() - started
    entry = store_root / "k8s" / f"{default_binaries_version}-{platform_suffix()}"
    assert downloaded.directory == entry and not entry.stat().st_mode & stat.S_IWUSR
    assert seconds < 60, f"download + verify + unpack took {seconds:.1f} s"
    with ControlPlane(binaries=downloaded) as control_plane:
        assert kubernetes.client.VersionApi(control_plane.api_client()).get_code().git_version \
            == default_binaries_version.tag
