"""Start-up failures of ``python -m ray_operator`` end with one line and a nonzero exit."""

import socket
import subprocess
import sys

import yaml


def run_cli(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "ray_operator", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_missing_kubeconfig(tmp_path):
    result = run_cli("--kubeconfig", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("ray-operator: error: cannot load")


def test_garbage_kubeconfig(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(": : not yaml [")
    result = run_cli("--kubeconfig", str(path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unreachable_server(tmp_path):
    server = f"http://127.0.0.1:{free_port()}"
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    result = run_cli("--kubeconfig", str(path))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"ray-operator: error: cannot reach the API server at {server}")


def test_bad_resolver():
    result = run_cli("--dashboard-resolver", "no_such_module:x", "--kubeconfig", "/dev/null")
    assert result.returncode == 2
    assert "no_such_module" in result.stderr and "Traceback" not in result.stderr
