"""The oldest version of every dependency the package declares, as pip constraints.

``make test-minimums`` installs the package with these pinned (``name==floor`` for each
``name>=floor`` of ``pyproject.toml``'s dependencies and the extras it names) and runs a
representative part of the suite on them: a declared range is a promise only when its floor
is run.  Prints the constraints, one per line.

    python .ci/floors.py [extra ...]
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
_FLOOR = re.compile(r"^\s*([A-Za-z0-9_.\-\[\]]+?)\s*>=\s*([0-9][^,;\s]*)\s*(;.*)?$")


def floors(extras: list[str]) -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    declared = list(project["dependencies"])
    for extra in extras:
        declared += project["optional-dependencies"][extra]
    pins: dict[str, str] = {}
    for requirement in declared:
        match = _FLOOR.match(requirement)
        if match is None:
            continue
        name = re.sub(r"\[.*\]", "", match.group(1)).lower()
        marker = match.group(3) or ""
        pins[name] = f"{name}=={match.group(2)}{marker}"
    return sorted(pins.values())


if __name__ == "__main__":
    print("\n".join(floors(sys.argv[1:])))
