"""White-box tests of the Go build: the per-version facts it reads, the toolchain it picks.

Internal on purpose (see README "Contributing"): these facts decide whether a
build of a new Kubernetes version works, long before a five-minute build
would tell.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envtest import Version
from envtest.binaries import Resolver
from envtest.binaries.gobuild import parse_kubernetes_gomod, staging_version, toolchain_for


def _module_file(module: str, version: str, path: str) -> str:
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                         capture_output=True, text=True, check=True)
    info = json.loads(out.stdout)
    return (Path(info["Dir"]) / path).read_text() if path else Path(info["GoMod"]).read_text()


def test_build_facts_come_from_the_versions_own_go_mod(
        default_binaries_version: Version) -> None:
    tag = default_binaries_version.tag
    facts = parse_kubernetes_gomod(_module_file("k8s.io/kubernetes", tag, ""),
                                   _module_file("k8s.io/kubernetes", tag, "hack/lib/etcd.sh"))
    assert "k8s.io/api" in facts.staging_modules and "k8s.io/client-go" in facts.staging_modules
    assert facts.go_version.startswith("1.")
    assert any(line.startswith("godebug") for line in facts.godebug)
    assert facts.etcd_version.count(".") == 2
    assert staging_version(default_binaries_version) == (
        f"v0.{default_binaries_version.minor}.{default_binaries_version.patch}")


def test_toolchain_choice() -> None:
    assert toolchain_for("1.25.0", "1.26.8") == "local"
    assert toolchain_for("1.27", "1.26.8") == "go1.27.0"
    assert toolchain_for("1.27.3", "1.26.8") == "go1.27.3"


@pytest.mark.slow
def test_real_binaries_report_their_versions(default_binaries_version: Version) -> None:
    binaries = Resolver(str(default_binaries_version)).resolve().binaries
    apiserver = subprocess.run([binaries.kube_apiserver, "--version"], capture_output=True,
                               text=True, check=True).stdout.strip()
    assert apiserver == f"Kubernetes {default_binaries_version.tag}"
    etcd_sh = _module_file("k8s.io/kubernetes", default_binaries_version.tag, "hack/lib/etcd.sh")
    pinned = parse_kubernetes_gomod("go 1.0\nk8s.io/api => ./staging/src/k8s.io/api\n",
                                    etcd_sh).etcd_version
    etcd = subprocess.run([binaries.etcd, "--version"], capture_output=True, text=True,
                          check=True).stdout
    assert f"etcd Version: {pinned}" in etcd


# A go command standing in for the real one: it serves a Kubernetes 1.29 module whose
# sources (like real old releases) this Go cannot build, and builds with the release's Go.
FAKE_GO = r'''#!{python}
import json, os, sys
root = {root!r}
args = sys.argv[1:]
with open(os.path.join(root, "calls"), "a") as calls:
    calls.write(os.environ.get("GOTOOLCHAIN", "") + " " + " ".join(args) + "\n")
if args[:2] == ["env", "GOVERSION"]:
    print("go1.26.8")
elif args[:2] == ["mod", "download"]:
    module = "etcd" if "etcd" in args[-1] else "kubernetes"
    print(json.dumps({{"Dir": os.path.join(root, module),
                      "GoMod": os.path.join(root, module, "go.mod")}}))
elif args[:2] == ["mod", "tidy"] and {tidy_fails}:
    print("k8s.io/legacy-cloud-providers@v0.29.6: reading .../v0.29.6.zip: 403 Forbidden")
    sys.exit(1)
elif args[0] == "build":
    local = os.environ.get("GOTOOLCHAIN") == "local"
    if local and {fails_locally} and "kube-apiserver" in args[-1]:
        print("link: github.com/old/dep: invalid reference to runtime.something")
        sys.exit(1)
    if {always_fails}:
        print("compile: broken")
        sys.exit(1)
    out = args[args.index("-o") + 1]
    open(out, "w").write("built")
'''


def _fake_go(tmp_path: Path, fails_locally: bool, always_fails: bool = False,
             tidy_fails: bool = False) -> dict[str, str]:
    (tmp_path / "kubernetes" / "hack" / "lib").mkdir(parents=True)
    (tmp_path / "kubernetes" / "go.mod").write_text(
        "module k8s.io/kubernetes\n\ngo 1.21\n\n"
        "replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n)\n")
    (tmp_path / "kubernetes" / ".go-version").write_text("1.21.13\n")
    (tmp_path / "kubernetes" / "hack" / "lib" / "etcd.sh").write_text(
        "ETCD_VERSION=${ETCD_VERSION:-3.5.10}\n")
    (tmp_path / "etcd").mkdir()
    (tmp_path / "etcd" / "go.mod").write_text("module go.etcd.io/etcd/server/v3\n\ngo 1.20\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(FAKE_GO.format(python=sys.executable, root=str(tmp_path),
                                 fails_locally=fails_locally, always_fails=always_fails,
                                 tidy_fails=tidy_fails))
    go.chmod(0o755)
    return {"PATH": str(bin_dir), "HOME": str(tmp_path)}


def test_a_release_the_local_go_cannot_build_is_built_with_its_own_go(tmp_path: Path) -> None:
    from envtest.binaries.gobuild import build_kubernetes

    environ = _fake_go(tmp_path, fails_locally=True)
    dest, log = tmp_path / "dest", tmp_path / "build.log"
    dest.mkdir()
    report = build_kubernetes(Version(1, 29, 6), ("kube-apiserver", "etcd"), dest,
                              tmp_path / "work", log, environ=environ)
    assert report.toolchain == "go1.21.13" and report.as_dict()["toolchain"] == "go1.21.13"
    assert (dest / "kube-apiserver").read_text() == "built"
    text = log.read_text()
    assert "building with GOTOOLCHAIN=local (this machine's Go is 1.26.8)" in text
    assert ("Go 1.26.8 (local) could not build Kubernetes 1.29.6 (step 'build kube-apiserver "
            "v1.29.6' failed" in text)
    assert "building again with GOTOOLCHAIN=go1.21.13, the Go that release names" in text
    builds = [line.split()[0] for line in (tmp_path / "calls").read_text().splitlines()
              if " build " in line and "kube-apiserver" in line]
    assert builds == ["local", "go1.21.13"]


def test_a_release_that_builds_locally_keeps_the_local_go(tmp_path: Path) -> None:
    from envtest.binaries.gobuild import build_kubernetes

    environ = _fake_go(tmp_path, fails_locally=False)
    (tmp_path / "dest").mkdir()
    report = build_kubernetes(Version(1, 29, 6), ("kube-apiserver",), tmp_path / "dest",
                              tmp_path / "work", tmp_path / "build.log", environ=environ)
    assert report.toolchain == "local"
    assert "building again" not in (tmp_path / "build.log").read_text()


def test_when_neither_go_builds_it_the_error_names_both(tmp_path: Path) -> None:
    from envtest.binaries.gobuild import build_kubernetes
    from envtest.errors import BuildError

    environ = _fake_go(tmp_path, fails_locally=True, always_fails=True)
    (tmp_path / "dest").mkdir()
    with pytest.raises(BuildError, match=r"(?s)compile: broken.*asks for Go 1\.21 .*this machine "
                                         r"has Go 1\.26\.8, and the build used "
                                         r"GOTOOLCHAIN=go1\.21\.13"):
        build_kubernetes(Version(1, 29, 6), ("kube-apiserver",), tmp_path / "dest",
                         tmp_path / "work", tmp_path / "build.log", environ=environ)


def test_a_module_only_cloud_providers_need_missing_builds_providerless(tmp_path: Path) -> None:
    from envtest.binaries.gobuild import build_kubernetes

    environ = _fake_go(tmp_path, fails_locally=False, tidy_fails=True)
    (tmp_path / "dest").mkdir()
    report = build_kubernetes(Version(1, 29, 6), ("kube-apiserver",), tmp_path / "dest",
                              tmp_path / "work", tmp_path / "build.log", environ=environ)
    # A failed resolution is not the compiler's: no second toolchain for it.
    assert report.toolchain == "local"
    assert "build tag providerless" in (tmp_path / "build.log").read_text()
    calls = (tmp_path / "calls").read_text().splitlines()
    assert any(" list -tags selinux,notest,providerless -deps " in call for call in calls)
    assert any(" build " in call and "-tags selinux,notest,providerless " in call
               for call in calls)
