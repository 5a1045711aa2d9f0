"""The Go build cross-compiles: darwin/arm64 binaries from this Linux machine, for macOS users
(``envtest use 1.37 --os darwin --arch arm64``).  A full build for another platform takes
minutes, so it runs in ``make test-cross``, not in ``make test``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from envtest import Version
from envtest.binaries import Resolver

MACH_O_64 = 0xFEEDFACF
CPU_TYPE_ARM64 = 0x0100000C


@pytest.mark.cross
def test_the_go_build_makes_darwin_arm64_binaries(tmp_path: Path,
                                                  default_binaries_version: Version) -> None:
    resolution = Resolver(str(default_binaries_version), bin_dir=tmp_path / "store",
                          os_name="darwin", arch="arm64",
                          index_url="http://127.0.0.1:9/unreachable.yaml").resolve()
    binaries = resolution.binaries
    assert binaries.directory == (tmp_path / "store" / "k8s" /
                                  f"{default_binaries_version}-darwin-arm64")
    for name in ("kube-apiserver", "etcd"):
        magic, cpu = struct.unpack("<II", binaries[name].read_bytes()[:8])
        assert (magic, cpu) == (MACH_O_64, CPU_TYPE_ARM64), f"{name} is not a Mach-O arm64 binary"
    assert [s.source for s in resolution.steps if s.source in ("index", "build")] == [
        "index", "build"]
