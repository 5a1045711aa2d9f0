"""No secret reaches a log, a report or an artifact.

A Secret with a unique value is written; then every place the framework writes
or shows text is searched for the value (plain and base64) and for the private
keys of the control plane: component logs, the audit log, the diagnostics of a
failed test and the artifacts written for CI.
"""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

from envtest import REDACTED, ControlPlane, create_namespace, namespace_objects, request


def _needles(control_plane: ControlPlane, value: str) -> dict[str, str]:
    assert control_plane.pki is not None and control_plane.admin is not None
    admin_key = control_plane.admin.credentials.key_path.read_text()
    return {
        "secret value": value,
        "secret value (base64)": base64.b64encode(value.encode()).decode(),
        "admin private key": admin_key.splitlines()[1],
        "service-account signing key": control_plane.pki.sa_key_path.read_text().splitlines()[1],
    }


def test_secrets_stay_out_of_logs_and_diagnostics() -> None:
    value = f"s3cr3t-{secrets.token_hex(8)}"
    with ControlPlane(audit="all") as control_plane:
        api = control_plane.api_client()
        create_namespace(api, "vault")
        request(api, "POST", "/api/v1/namespaces/vault/secrets", body={
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"},
            "stringData": {"password": value}})
        request(api, "GET", "/api/v1/namespaces/vault/secrets/token")  # audited (audit=all)
        dump = namespace_objects(api, "vault")
        assert "token" in dump and REDACTED in dump
        texts = {"diagnostics": dump}
        texts.update({name: path.read_text() for name, path in control_plane.log_paths.items()})
        assert texts["audit"].count('"secrets"') >= 2, "the Secret requests must be audited"
        for needle_name, needle in _needles(control_plane, value).items():
            for text_name, text in texts.items():
                assert needle not in text, f"{needle_name} leaked into {text_name}"


def test_failed_test_report_and_artifacts_redact_secrets(tmp_path: Path) -> None:
    value = f"s3cr3t-{secrets.token_hex(8)}"
    # The value comes from the environment: pytest's traceback shows test source lines.
    (tmp_path / "test_leak.py").write_text(textwrap.dedent('''
        import os

        def test_fails_with_a_secret_around(k8s, namespace):
            k8s.core.create_namespaced_secret(namespace, {
                "metadata": {"name": "creds"},
                "stringData": {"password": os.environ["LEAK_PROBE"]}})
            assert False, "fail on purpose to get diagnostics"
    '''))
    artifacts = tmp_path / "artifacts"
    result = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_leak.py"),
                             "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                             f"--envtest-artifacts={artifacts}"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "LEAK_PROBE": value})
    assert result.returncode == 1
    assert "envtest: objects in namespace" in result.stdout
    assert "creds" in result.stdout and REDACTED in result.stdout
    # The one file no human reads: the failed test's snapshot holds its Secrets in clear (a
    # restore needs them), private (0600 in 0700).
    snapshots = [p for p in artifacts.rglob("objects.json") if p.parent.name == "snapshot"]
    assert len(snapshots) == 1 and snapshots[0].stat().st_mode & 0o077 == 0, snapshots
    written = "\n".join(p.read_text(errors="replace") for p in artifacts.rglob("*")
                        if p.is_file() and p not in snapshots)
    assert "creds" in written
    for encoded in (value, base64.b64encode(value.encode()).decode()):
        assert encoded not in result.stdout
        assert encoded not in written
    assert "PRIVATE KEY" not in result.stdout and "PRIVATE KEY" not in written
    assert not list(artifacts.rglob("*.kubeconfig")) and not list(artifacts.rglob("*.key"))
