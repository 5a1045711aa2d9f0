"""kubectl more than one minor away from the cluster: said, with the command that fixes it.

The kubectl here is a small script on PATH that answers ``kubectl version
--client -o json`` as a kubectl of the chosen minor would; the clusters are
real (``envtest up``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from framework_helpers import LineReader

from envtest import Version
from envtest.controlplane.access.kubectl import kubectl_skew

ENVTEST_CLI = Path(sys.executable).parent / "envtest"


def fake_kubectl(directory: Path, minor: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    answer = json.dumps({"clientVersion": {"major": "1", "minor": minor,
                                           "gitVersion": f"v1.{minor.rstrip('+')}.0"}})
    path = directory / "kubectl"
    path.write_text(f"#!/bin/sh\necho '{answer}'\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("kubectl_minor", "cluster", "warned"), [
    ("30", "1.37.2", True), ("35", "1.37.2", True), ("36", "1.37.2", False),
    ("37", "1.37.2", False), ("38", "1.37.2", False), ("39+", "1.37.2", True),
    ("37", "1.33.1", True),
])
def test_a_kubectl_more_than_one_minor_away_is_named_with_the_fix(
        tmp_path: Path, kubectl_minor: str, cluster: str, warned: bool) -> None:
    kubectl = fake_kubectl(tmp_path, kubectl_minor)
    warning = kubectl_skew(kubectl, cluster)
    if not warned:
        assert warning is None
        return
    assert warning is not None
    cluster_minor = cluster.split(".")[1]
    assert f"{kubectl} is kubectl 1.{kubectl_minor.rstrip('+')}" in warning
    assert f"envtest use 1.{cluster_minor} --with kubectl" in warning


def test_a_kubectl_that_does_not_say_its_version_gives_no_warning(tmp_path: Path) -> None:
    broken = tmp_path / "kubectl"
    broken.write_text("#!/bin/sh\necho 'not json'\n")
    broken.chmod(0o755)
    assert kubectl_skew(broken, "1.37.2") is None
    assert kubectl_skew(fake_kubectl(tmp_path / "far", "20"), None) is None


def test_envtest_up_warns_of_the_kubectl_it_prints(tmp_path: Path,
                                                   default_binaries_version: Version) -> None:
    far = default_binaries_version.minor - 5
    fake_kubectl(tmp_path / "bin", str(far))
    env = {key: value for key, value in os.environ.items()
           if key not in ("KUBEBUILDER_ASSETS", "TEST_ASSET_KUBECTL")}
    # named as a user names one (the cache may hold a kubectl of the cluster's version too)
    env.update({"TEST_ASSET_KUBECTL": str(tmp_path / "bin" / "kubectl"), "COLUMNS": "400",
                "XDG_STATE_HOME": str(tmp_path / "state"), "ENVTEST_INSTALLED_ONLY": "1"})
    up = subprocess.Popen([str(ENVTEST_CLI), "up", "--k8s-version",
                           default_binaries_version.minor_str],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        reader = LineReader(up)
        printed = reader.wait_for("kubectl: ", timeout=120)
        assert printed == f"kubectl: {tmp_path / 'bin' / 'kubectl'}"
        warning = reader.wait_for("warning: ", timeout=10)
        assert f"is kubectl 1.{far}, 5 minors from the cluster's {default_binaries_version}" \
            in warning
        assert f"'envtest use {default_binaries_version.minor_str} --with kubectl'" in warning
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=60)
