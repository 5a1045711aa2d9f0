"""White-box tests of the Go build: the per-version facts it reads, the toolchain it picks.

Internal on purpose (see README "Contributing"): these facts decide whether a
build of a new Kubernetes version works, long before a five-minute build
would tell.
"""

from __future__ import annotations

import json
import subprocess
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
