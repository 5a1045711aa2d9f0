"""False alarms of exploration on users' operators: every kind, every pattern, nothing tuned.

Explores (``--envtest-explore=all``) the example operators of this repository, of every kind,
as a user would run it on their own suite, and counts what it calls a bug:

- ``ray``: this repository's Ray operator port (a thread operator), three of its RayCluster
  tests;
- ``lightkube``: the async lightkube Cache operator (a command: ``tests/examples/
  lightkube_cache``), written as a new user writes one: a Deployment, a headless Service, a
  ConfigMap, and a record in a namespace of its own named after the test's namespace;
- ``kopf``: the kopf example (``kopf run`` and a thread);
- ``go``: the Go order keeper in its safe mode (a compiled binary).

A finding (a point judged ``bug``, ``flaky`` or ``slow recovery``: each asks a human to
look) is a false alarm unless its review says it is real (``bench/results/
false-alarms-review.json``, written by hand after reading the point's report, keyed by
``<operator> <nodeid> <label>``, holding what its reader read): an unread finding counts as
false.  Flaky points and slow recoveries are also counted apart.

Writes ``bench/results/false-alarms.json``: ``{"operators": [{"name", "kind", "tests",
"points", "bugs", "flaky", "false_alarms", ...}], "false_alarms": N}``.  The goal is 0.

    python -m bench.bench_false_alarms [--only lightkube,kopf] [--workers 2] [--limit 40]
        [--kinds operations]
    python -m bench.bench_false_alarms --rejudge    # after editing the review file
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, read, save_json

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = RESULTS / "false-alarms.json"
REVIEWS = RESULTS / "false-alarms-review.json"
#: name -> (kind, pytest arguments selecting its tests).
OPERATORS: dict[str, tuple[str, list[str]]] = {
    "ray": ("thread (this repository's Ray operator port)",
            ["tests/operator/test_raycluster.py", "-k",
             "scaling_up_and_down or workers_to_delete or no_status_write"]),
    "lightkube": ("command (async lightkube, a new user's operator)",
                  ["tests/examples/test_lightkube_cache.py"]),
    "kopf": ("kopf (kopf run and a thread)", ["tests/examples/test_kopf_webapp.py"]),
    "go": ("Go (a compiled binary)", ["tests/examples/test_go_operator.py", "-k",
                                      "safe_mode"]),
}
#: Verdicts that ask a human to read the report.
FINDINGS = ("bug", "flaky", "slow recovery")


def output_for(kinds: str) -> Path:
    """``false-alarms.json`` for every fault kind; ``false-alarms-operations.json`` for the
    user's side (the kinds are judged apart: they find different things)."""
    return OUTPUT if kinds == "all" else RESULTS / f"false-alarms-{kinds.replace(',', '-')}.json"


def explore(name: str, args: list[str], workers: int, limit: int,
            kinds: str = "all") -> dict[str, Any]:
    """One operator's exploration: its summary document and minutes."""
    with tempfile.TemporaryDirectory(prefix="false-alarms-") as folder:
        summary = Path(folder) / "summary.json"
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args,
                   f"--envtest-explore={kinds}", f"--envtest-explore-limit={limit}",
                   f"--envtest-explore-json={summary}", f"--basetemp={folder}/tmp"]
        if workers > 1:
            command += ["-n", str(workers)]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                              env=os.environ.copy(), check=False, timeout=4 * 3600)
        minutes = (time.monotonic() - started) / 60
        data = json.loads(summary.read_text()) if summary.exists() else {"tests": []}
    return {"minutes": round(minutes, 1), "exit": done.returncode, "document": data,
            "tail": done.stdout[-1500:] if not data["tests"] else ""}


def judged(name: str, kind: str, run: dict[str, Any],
           reviews: dict[str, Any]) -> dict[str, Any]:
    """An operator's line: tests, points, verdicts, and each finding with its review."""
    tests = run["document"].get("tests", [])
    outcomes = [(t["nodeid"], o) for t in tests for o in t.get("outcomes", [])]
    findings = []
    for nodeid, outcome in outcomes:
        if outcome["verdict"] not in FINDINGS:
            continue
        label = outcome["point"]["label"]
        what = (outcome.get("error") or "; ".join(
            outcome.get("differences", []) + outcome.get("findings", []))
            or outcome.get("reason", ""))
        review = read(reviews.get(f"{name} {nodeid} {label}") or {}, what)
        findings.append({
            "test": nodeid, "label": label, "verdict": outcome["verdict"],
            "what": what[:400],
            "review": review.get("verdict", "unreviewed"), "why": review.get("why", "")})
    bugs = [f for f in findings if f["verdict"] == "bug"]
    return {
        "name": name, "kind": kind, "tests": len(tests), "points": len(outcomes),
        "minutes": run["minutes"],
        "nothing": [t["nodeid"] + ": " + t["nothing"] for t in tests if t.get("nothing")],
        "verdicts": _count(o["verdict"] for _, o in outcomes),
        "bugs": len(bugs), "flaky": sum(1 for f in findings if f["verdict"] == "flaky"),
        "slow_recoveries": sum(1 for f in findings if f["verdict"] == "slow recovery"),
        # Any finding (a bug, a flaky point, a slow recovery) not read true is a false alarm.
        "false_alarms": sum(1 for f in findings if not f["review"].startswith("true")),
        "findings": findings, "exit": run["exit"], "tail": run["tail"],
    }


def _count(verdicts: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="operators, e.g. lightkube,kopf")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=40, help="points per test at most")
    parser.add_argument("--rejudge", action="store_true",
                        help="judge the runs kept in false-alarms.json again")
    parser.add_argument("--kinds", default="all",
                        help="exploration kinds (all: every fault; operations: spec changes)")
    args = parser.parse_args(argv)
    output = output_for(args.kinds)
    reviews = json.loads(REVIEWS.read_text()) if REVIEWS.exists() else {}
    previous = json.loads(output.read_text()) if output.exists() else {"operators": []}
    kept = {o["name"]: {**o, "document": previous.get("runs", {}).get(o["name"],
                                                                     {"tests": []})}
            for o in previous.get("operators", [])}
    chosen = [n for n in OPERATORS if not args.only or n in args.only.split(",")]
    for name in chosen:
        kind, selection = OPERATORS[name]
        if args.rejudge and name in kept:
            run = {"minutes": kept[name]["minutes"], "exit": kept[name]["exit"],
                   "tail": kept[name].get("tail", ""), "document": kept[name]["document"]}
        else:
            run = explore(name, selection, args.workers, args.limit, args.kinds)
        line = judged(name, kind, run, reviews)
        line["document"] = run["document"]
        kept[name] = line
        print(f"{name}: {line['tests']} tests, {line['points']} points, {line['bugs']} bugs "
              f"({line['false_alarms']} false alarms), {line['flaky']} flaky, "
              f"{line['minutes']} min", flush=True)
        write(kept, output)
    document = write(kept, output)
    print(f"false alarms: {document['false_alarms']}")
    return 0


def write(kept: dict[str, dict[str, Any]], output: Path = OUTPUT) -> dict[str, Any]:
    operators = [kept[name] for name in OPERATORS if name in kept]
    document = {"operators": [{k: v for k, v in o.items() if k != "document"}
                              for o in operators],
                "false_alarms": sum(o["false_alarms"] for o in operators),
                "bugs": sum(o["bugs"] for o in operators),
                "points": sum(o["points"] for o in operators)}
    save_json(output, {**document, "runs": {o["name"]: o["document"] for o in operators}})
    return document


if __name__ == "__main__":
    raise SystemExit(main())
