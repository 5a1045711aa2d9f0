"""The distribution is installable as the README says: it builds, with its entry points,
license, version and changelog entry (``make package`` also runs twine check in CI)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import envtest

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_carries_the_plugin_the_command_and_the_license(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path),
                            str(ROOT)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = tmp_path.glob("pytest_envtest-*.whl")
    assert wheel.name.startswith(f"pytest_envtest-{envtest.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read(next(n for n in names
                                         if n.endswith("entry_points.txt"))).decode()
    assert "[pytest11]\nenvtest = envtest.pytest_plugin" in entry_points
    assert "envtest = envtest.cli:main" in entry_points
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert "envtest/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "ray_operator/"))]
    assert f"## {envtest.__version__}" in (ROOT / "CHANGELOG.md").read_text()
