"""The architecture holds: layers and independence (import-linter), one public API, no pytest below
the plugin, no module over 400 lines.  Each check fails when someone takes a shortcut through the
layers."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import envtest
import envtest.binaries

ROOT = Path(__file__).resolve().parents[2]
#: The one place under tests/ that may import internal modules (white-box tests).
INTERNALS = ROOT / "tests" / "framework" / "internals"
PUBLIC_MODULES = {"envtest", "envtest.binaries"}
#: The longest a module of the framework or the operator may be: past it, split it on its seams.
MAX_MODULE_LINES = 400


def _envtest_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of envtest in a file, inner functions included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "envtest":
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names
                      if a.name.split(".")[0] == "envtest"]
    return found


def _users_of_the_framework() -> list[Path]:
    files = [ROOT / "conftest.py", *sorted((ROOT / "bench").rglob("*.py")),
             *sorted((ROOT / "tests").rglob("*.py"))]
    return [f for f in files if not f.is_relative_to(INTERNALS)]


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    if not lint_imports.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    result = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_tests_bench_and_conftest_use_only_the_public_api() -> None:
    offenders = []
    for path in _users_of_the_framework():
        for line, module, names in _envtest_imports(path):
            public = envtest.__all__ if module == "envtest" else envtest.binaries.__all__
            if module not in PUBLIC_MODULES:
                offenders.append(f"{path.relative_to(ROOT)}:{line}: import from {module}")
            unknown = [n for n in names if n not in public]
            if module in PUBLIC_MODULES and unknown:
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {module} does not "
                                 f"export {unknown}")
    assert not offenders, "\n".join(offenders)


def test_tests_never_import_the_benchmarks() -> None:
    importers = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bench":
                importers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not importers, "bench/ may import tests/support, not the other way round: " + \
        ", ".join(importers)


def _python(code: str) -> str:
    """What ``code`` prints, run in a fresh interpreter (what it imports is its own)."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_public_api_is_importable_and_loads_no_pytest() -> None:
    code = ("import sys, envtest, envtest.binaries\n"
            "missing = [n for n in envtest.__all__ if not hasattr(envtest, n)]\n"
            "assert not missing, missing\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pytest', '_pytest', 'envtest') and (m.startswith(('pytest', '_pytest')) "
            "or m.startswith('envtest.pytest_plugin')))\n"
            "print(loaded)\n")
    loaded = _python(code).strip()
    assert loaded == "[]", f"importing envtest loaded {loaded}"


def test_every_public_name_says_what_it_is() -> None:
    undocumented = [name for name in envtest.__all__
                    if callable(getattr(envtest, name)) and not getattr(envtest, name).__doc__]
    assert not undocumented, f"public names without a docstring: {undocumented}"


def test_the_lazy_public_api_names_every_export_once() -> None:
    lazy = set(envtest._LAZY)
    assert lazy == set(envtest.__all__) - {"__version__"}, lazy ^ set(envtest.__all__)


def test_importing_envtest_or_its_command_line_is_cheap() -> None:
    code = ("import sys, envtest, envtest.cli\n"
            "print(sorted(m for m in ('kubernetes', 'envtest.controlplane', 'envtest.api')"
            " if m in sys.modules))\n")
    assert _python(code).strip() == "[]", "heavy modules load only when used"


def test_the_plugin_loads_the_fault_proxys_aiohttp_only_where_a_proxy_runs() -> None:
    """Every pytest process loads the plugin (inner sessions, xdist workers): aiohttp's 0.14 s
    of imports are paid only by a session that runs an operator through its proxy."""
    code = ("import sys, envtest.pytest_plugin\n"
            "print('aiohttp' in sys.modules)\n"
            "from envtest.api.faults import OperatorProxy\n"
            "print('aiohttp' in sys.modules, OperatorProxy.__name__)\n")
    said = _python(code)
    assert said.split() == ["False", "True", "OperatorProxy"], said


def test_no_module_of_the_framework_or_the_operator_is_over_400_lines() -> None:
    sources = [*(ROOT / "fixtures" / "envtest").rglob("*.py"),
               *(ROOT / "operator" / "ray_operator").rglob("*.py")]
    assert len(sources) > 100, sources
    long = {str(path.relative_to(ROOT)): lines for path in sources
            if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these along their seams (README, Architecture): {long}"
