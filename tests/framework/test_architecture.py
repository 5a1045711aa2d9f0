"""The architecture holds: layers and independence (import-linter), one public API, no pytest below
the plugin, no module over 400 lines, no folder over 12 modules, a one-line docstring per package
and every package in the README's tree.  Each check fails when someone takes a shortcut through
the layers."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import envtest
import envtest.binaries
import envtest.strategies

ROOT = Path(__file__).resolve().parents[2]
#: The one place under tests/ that may import internal modules (white-box tests).
INTERNALS = ROOT / "tests" / "framework" / "internals"
PUBLIC_MODULES = {"envtest", "envtest.binaries", "envtest.strategies"}
#: The longest a module of the framework or the operator may be: past it, split it on its seams.
MAX_MODULE_LINES = 400
#: The most modules a framework folder may hold side by side: past it, a newcomer reads a list
#: instead of a map; split it into packages by job.
MAX_MODULES_PER_FOLDER = 12
FRAMEWORK = ROOT / "fixtures" / "envtest"
#: The packages split by job, each with a layers contract of its own in pyproject.toml.
LAYERED_PACKAGES = ("controlplane/", "pytest_plugin/", "api/workloads/", "system/children/")


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
    said = " ".join(result.stdout.split())
    missing = [package for package in LAYERED_PACKAGES if f"{package} " not in said]
    assert not missing, f"no import contract checks the layers inside {missing}: {said}"


def test_tests_bench_and_conftest_use_only_the_public_api() -> None:
    offenders = []
    for path in _users_of_the_framework():
        for line, module, names in _envtest_imports(path):
            public = {"envtest": [*envtest.__all__, "binaries", "strategies"],
                      "envtest.binaries": envtest.binaries.__all__,
                      "envtest.strategies": envtest.strategies.__all__}.get(module, [])
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


def test_the_plugin_loads_no_hypothesis_until_operations_are_explored() -> None:
    """Hypothesis is the operations extra's: the plugin (which every pytest session with the
    package loads) must not import it, nor pay its start-up (its charmap)."""
    code = ("import sys, envtest.pytest_plugin\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('hypothesis', 'hypothesis_jsonschema')))\n")
    assert _python(code).strip() == "[]"


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


def _framework_packages() -> list[Path]:
    return sorted(init.parent for init in FRAMEWORK.rglob("__init__.py"))


def test_no_framework_folder_has_more_than_12_modules_side_by_side() -> None:
    packages = _framework_packages()
    assert len(packages) > 15, packages
    crowded = {str(package.relative_to(FRAMEWORK)) or ".": count for package in packages
               if (count := len([m for m in package.glob("*.py") if m.name != "__init__.py"]))
               > MAX_MODULES_PER_FOLDER}
    assert not crowded, f"split these into packages by job (README, Architecture): {crowded}"


def test_every_framework_package_says_in_one_line_what_belongs_there() -> None:
    """The first line of each package's docstring is a whole sentence: a newcomer who opens the
    folder reads what goes there before reading any module's name."""
    unsaid = []
    for package in _framework_packages():
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()), clean=False)
        first = (doc or "").split("\n")[0]
        if not first.endswith(".") or len(first.split()) < 4:
            unsaid.append(f"{package.relative_to(FRAMEWORK)}: {first!r}")
    assert not unsaid, f"give these packages a one-line docstring: {unsaid}"


def test_the_readme_tree_names_every_framework_package() -> None:
    readme = (ROOT / "README.md").read_text()
    tree = readme[readme.index("## Architecture"):]
    tree = tree[tree.index("```"):tree.index("```", tree.index("```") + 3)]
    named = {line.split()[0] for line in tree.splitlines()[1:] if line.strip()}
    packages = [package.name + "/" for package in _framework_packages() if package != FRAMEWORK]
    missing = sorted(name for name in packages if name not in named)
    assert not missing, f"the README's architecture tree does not show {missing}"
