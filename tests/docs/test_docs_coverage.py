"""Every fixture and every public name is documented: the guides name each fixture with its
signature and an example (run by test_examples.py), and every public name appears in the docs."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path

import pytest

import envtest

ROOT = Path(__file__).resolve().parents[2]
DOCS = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
#: The pool entry behind the fixtures: not for users (documented in its docstring as such).
INTERNAL_FIXTURES = {"envtest_entry"}


@pytest.fixture
def plugin(pytestconfig: pytest.Config) -> object:
    """The plugin as pytest loaded it (by its entry point; tests import no internals)."""
    return pytestconfig.pluginmanager.get_plugin("envtest")


def _fixtures(plugin: object) -> list[str]:
    return [name for name in plugin.__all__  # type: ignore[attr-defined]
            if not name.startswith("pytest_") and name not in INTERNAL_FIXTURES]


def test_every_fixture_has_a_section_with_an_example(plugin: object) -> None:
    text = (ROOT / "docs" / "fixtures.md").read_text()
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    missing = []
    for fixture in _fixtures(plugin):
        mine = [s for s in sections if re.match(rf"`{fixture}[`(]|.*`{fixture}`", s)]
        documented = any("→" in s.splitlines()[0] for s in mine)
        linked = any(f"`{fixture}`" in s and ".md" in s for s in mine)
        has_example = any("```python" in s for s in mine)
        if not mine or not documented or not (has_example or linked):
            missing.append(fixture)
    assert not missing, f"fixtures without a section (signature → type, example): {missing}"


def test_every_public_name_is_in_the_docs() -> None:
    missing = [name for name in envtest.__all__
               if not name.startswith("__") and not re.search(rf"\b{re.escape(name)}\b", DOCS)]
    assert not missing, f"public names the docs never mention: {missing}"


def test_fixture_docstrings_say_what_they_give(plugin: object) -> None:
    bare = [name for name in _fixtures(plugin)
            if not inspect.getdoc(getattr(plugin, name))]
    assert not bare, bare


def test_the_control_planes_reference_lists_each_of_its_documented_members() -> None:
    """ControlPlane is built from parts (``controlplane/plane*.py``), so its reference entry
    names its members by hand, in reading order: a new public one must be added there."""
    entry = re.search(r"^::: envtest\.ControlPlane\n((?:[ ]+.*\n)+)", DOCS, flags=re.M)
    assert entry, "docs/reference.md has no entry for envtest.ControlPlane"
    listed = re.search(r"members: \[([^\]]*)\]", entry.group(1))
    assert listed, "the ControlPlane entry lists no members"
    members: dict[str, object] = {}
    for klass in reversed(envtest.ControlPlane.__mro__):
        members.update(vars(klass))
    documented = {name for name, value in members.items() if not name.startswith("_")
                  and isinstance(value, property | types.FunctionType) and value.__doc__}
    assert documented == {name.strip() for name in listed.group(1).split(",")}


def _change_table(text: str) -> str:
    """The "To change | open" table of a page ("" if it has none)."""
    found = re.search(r"^\| To change \|.*?\n(?=[^|])", text, flags=re.M | re.S)
    return found.group(0) if found else ""


def test_the_where_to_change_table_is_one_and_names_what_exists() -> None:
    """The README's and the docs' "to change X, open Y" tables are the same, and every file or
    directory they name is there (under ``fixtures/envtest/`` unless the path says)."""
    table = _change_table((ROOT / "README.md").read_text())
    assert table, "the README has no 'To change | open' table"
    assert table == _change_table((ROOT / "docs" / "contributing.md").read_text())
    paths = re.findall(r"`([\w./-]+(?:\.py|\.md|/))`", table)
    assert len(paths) > 20, paths
    framework = ROOT / "fixtures" / "envtest"
    missing = [path for path in paths
               if not (ROOT / path).exists() and not (framework / path).exists()]
    assert not missing, f"the table names what is not there: {missing}"
