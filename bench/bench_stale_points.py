"""Stale points per test, before and after they came from any operator's deletes and relations.

Before (the rule of commit ``BEFORE``): a stale point per delete the operator made undone by
its own create, and per change of a custom resource (or of the deleted object) it heard
before it, each at two versions.  After (``api/explore/viewpoints.py``): a point per
delete undone by anyone and per related object that changed in between, merged by view and
capped.  Both are computed here from the same clean runs: each explored test runs once,
clean (``--envtest-explore-dry-run``), and a plugin hands its changes and requests to the
rule of then (its module, as it was at ``BEFORE``, read from git) and to today's.

Writes ``bench/results/stale-points.json``: per test the points of each, and the totals.

    python -m bench.bench_stale_points [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import RESULTS, save_json

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = RESULTS / "stale-points.json"
#: The last commit with the old rule (before issue 55's work).
BEFORE = "19c1391"
#: What is explored: the operator suite and the examples, each as a user's run.
SELECTIONS = {
    "ray operator (thread)": ["tests/operator/test_raycluster.py",
                              "tests/operator/test_rayservice.py",
                              "tests/operator/test_rayjob.py"],
    "kopf example": ["tests/examples/test_kopf_webapp.py"],
    "lightkube example (command)": ["tests/examples/test_lightkube_cache.py"],
    "go example": ["tests/examples/test_go_operator.py", "-k", "safe_mode"],
}
PLANTED = {"planted buckets (kopf)": ("scenario_buckets.py", {"BUCKET_DELETE": "blind"}),
           "planted stores (thread)": ("scenario_stores.py", {"STORE_DELETE": "blind"}),
           "planted shelves (command)": ("scenario_shelves.py", {"SHELF_CLAIMS": "blind"})}

PLUGIN = '''
"""Counts each clean run's stale points by the old rule and by today's (a bench's probe)."""
import json
import os
from collections import Counter

import old_viewpoints
from envtest.api.explore import viewpoints
from envtest.pytest_plugin.exploration import clean

_today = clean.view_points


def counted(kinds, changes, exchanges, merged):
    found = _today(kinds, changes, exchanges, merged)
    today = [p for p in found if p.kind == "stale"]
    before = old_viewpoints.stale_points(changes, exchanges)
    with open(os.environ["STALE_POINTS_FILE"], "a") as out:
        out.write(json.dumps({"test": os.environ.get("PYTEST_CURRENT_TEST", ""),
                              "before": len(before), "after": len(today),
                              "after_before_cap": len(today) + merged.get("beyond the limit", 0),
                              "deletes": sum(1 for e in exchanges
                                             if e.request.verb == "delete"
                                             and 200 <= e.code < 300)}) + "\\n")
    return found


clean.view_points = counted
'''


def old_module(folder: Path) -> None:
    """The old rule's module, from git, importable as ``old_viewpoints``."""
    text = subprocess.run(["git", "show", f"{BEFORE}:fixtures/envtest/api/explore/"
                           "viewpoints.py"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    text = re.sub(r"from \.\.(\w+)", r"from envtest.api.\1", text)
    text = re.sub(r"from \.(\w+)", r"from envtest.api.explore.\1", text)
    # Modules moved since (into api/objects/provenance), the same code.
    text = re.sub(r"envtest\.api\.objects\.(names|managers)\b",
                  r"envtest.api.objects.provenance.\1", text)
    (folder / "old_viewpoints.py").write_text(text)
    (folder / "stale_probe.py").write_text(PLUGIN)


def probe(args: list[str], cwd: Path, folder: Path, env: dict[str, str],
          workers: int) -> list[dict[str, Any]]:
    lines = folder / f"points-{len(list(folder.glob('points-*')))}.jsonl"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
               "stale_probe", *args, "--envtest-explore=stale", "--envtest-explore-dry-run"]
    if workers > 1:
        command += ["-n", str(workers)]
    environment = {**os.environ, **env, "STALE_POINTS_FILE": str(lines),
                   "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT),
                                                  os.environ.get("PYTHONPATH", "")])}
    subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True,
                   check=False, timeout=3600)
    if not lines.exists():
        return []
    return [json.loads(line) for line in lines.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    arguments = parser.parse_args(argv)
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="stale-points-") as name:
        folder = Path(name)
        old_module(folder)
        for label, args in SELECTIONS.items():
            rows[label] = probe(args, ROOT, folder, {}, arguments.workers)
        planted = folder / "planted"
        subprocess.run(["cp", "-r", str(ROOT / "tests/examples/planted"), str(planted)],
                       check=True)
        for label, (scenario, env) in PLANTED.items():
            rows[label] = probe([scenario], planted, folder, env, 1)
    summary = {label: {"tests": len(found), "before": sum(r["before"] for r in found),
                       "after": sum(r["after"] for r in found),
                       "after_before_cap": sum(r["after_before_cap"] for r in found),
                       "tests_with_deletes": sum(1 for r in found if r["deletes"])}
               for label, found in rows.items()}
    document = {"before": f"the rule of commit {BEFORE}", "operators": summary,
                "tests": rows}
    save_json(OUTPUT, document)
    for label, line in summary.items():
        print(f"{label}: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
