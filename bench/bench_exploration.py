"""What exploration costs and finds, and how often what it reports is real, on three operators.

Runs, one after the other (exploration is the measurement; nothing is compared to a run
without it):

- the unsafe example's exploration test (``tests/framework/test_exploration.py``): how long
  it takes to find its crash point, from the pytest command to the bug in the summary;
- three operators of different kinds, each explored under pytest-xdist (``--workers``):
  this repository's Ray operator port (``tests/operator``, Python, in threads and a
  process) for crashes and conflicts, the kopf example (``tests/examples/
  test_kopf_webapp.py``, ``kopf run`` and a thread) and the Go order keeper
  (``tests/examples/test_go_operator.py``, a compiled binary the test builds, as the Go
  examples do) for every kind (``--kinds`` sets one for all).  Each run writes its
  ``--envtest-explore-json``: points, verdicts, seconds, and the points a minute
  (points run / wall minutes).

The false-positive rate: every finding (a point whose verdict asks a human to look: a bug, a
slow recovery, a flaky point) is read, and the review says whether it was real (a problem
of the operator, its tests or the framework, fixed or kept with a reason) or not (the
report sent the reader after nothing).  The reviews are ``bench/results/
exploration-review.json`` (written by hand after reading the reports, keyed by
``nodeid point``); a finding with no review is counted as unreviewed, never as real.

Writes ``bench/results/exploration.json``.

    python -m bench.bench_exploration [--kinds KINDS] [--limit 20] [--seed 1]
                                      [--workers 2] [--only ours,kopf,go] [--skip-unsafe]
    python -m bench.bench_exploration --rejudge    # after editing the review file
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, save_json

ROOT = Path(__file__).resolve().parent.parent
_FOUND = re.compile(r"crash point found in ([\d.]+) s")
#: The three operators: name -> (kind, the tests that explore it, the fault kinds).  Ours is
#: explored for crashes and conflicts, as the figure before verdicts was measured (46 of 536
#: points failing); the two small examples for every kind, so that they give points enough
#: to judge the judging by.
OPERATORS = {
    "ours": ("Python (this repository's Ray operator port: threads and a process)",
             ["tests/operator"], "crashes,conflicts"),
    "kopf": ("kopf (kopf run and a thread)", ["tests/examples/test_kopf_webapp.py"], "all"),
    "go": ("Go (a compiled binary, built by the test)", ["tests/examples/test_go_operator.py"],
           "all"),
}
#: Verdicts that ask a human to read the report.
FINDINGS = ("bug", "slow recovery", "flaky")
REVIEW = RESULTS / "exploration-review.json"


def pytest(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                            cwd=ROOT, capture_output=True, text=True, timeout=7200,
                            env={**os.environ, "ENVTEST_INSTALLED_ONLY": "1"})
    return result, time.monotonic() - started


def unsafe_example() -> dict[str, Any]:
    result, wall = pytest("tests/framework/test_exploration.py", "-k", "unsafe_operator",
                          "-s", "-q")
    found = _FOUND.search(result.stdout)
    if result.returncode != 0 or found is None:
        raise SystemExit(f"the unsafe example's exploration test failed:\n"
                         f"{result.stdout[-4000:]}")
    return {"found_in_seconds": float(found.group(1)), "test_wall": round(wall, 1)}


def explore(paths: list[str], kinds: str, limit: int, seed: int,
            workers: str) -> dict[str, Any]:
    """One exploration run: its summary, and the wall time."""
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "summary.json"
        result, wall = pytest(*paths, "-q", "-n", workers, f"--envtest-explore={kinds}",
                              f"--envtest-explore-limit={limit}",
                              f"--envtest-explore-seed={seed}",
                              f"--envtest-explore-json={target}")
        if not target.exists():
            raise SystemExit(f"no exploration summary (exit {result.returncode}):\n"
                             f"{result.stdout[-4000:]}")
        data = json.loads(target.read_text())
    return {"wall": round(wall, 1), "exit": result.returncode, **data}


def said(outcome: dict[str, Any]) -> str:
    """What the report said of a point, as a reader sees it first."""
    if outcome["verdict"] == "slow recovery":
        return f"recovered after {outcome['recovered_after']:.1f} s"
    return (outcome["error"] or "; ".join(outcome["differences"] + outcome["findings"])
            or outcome["reason"] or "")


def findings_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every point whose verdict asks for a reader, with what the report said."""
    found = []
    for test in data["tests"]:
        for outcome in test["outcomes"]:
            if outcome["verdict"] in FINDINGS:
                found.append({"key": f"{test['nodeid']} {outcome['point']['spec']}",
                              "verdict": outcome["verdict"],
                              "said": said(outcome)[:300]})
    return found


def judged(name: str, data: dict[str, Any], reviews: dict[str, Any],
           kinds: str = "") -> dict[str, Any]:
    """Points, findings and what the reviews say of them, for one operator."""
    findings = findings_of(data)
    for finding in findings:
        review = reviews.get(finding["key"])
        finding["real"] = None if review is None else bool(review["real"])
        finding["why"] = "" if review is None else review["why"]
    real = sum(1 for f in findings if f["real"] is True)
    false = sum(1 for f in findings if f["real"] is False)
    unreviewed = sum(1 for f in findings if f["real"] is None)
    points = data["points"]
    per_test = {t["nodeid"]: {"points": len(t["outcomes"]), "counts": t["counts"],
                              "found": t.get("found", 0), "merged": t.get("merged", {}),
                              "seconds": round(t["clean_seconds"] + sum(
                                  o["seconds"] for o in t["outcomes"]), 1),
                              "clean_seconds": round(t["clean_seconds"], 1)}
                for t in data["tests"]}
    return {"operator": name, "kind": OPERATORS[name][0], "tests": len(data["tests"]),
            "kinds": kinds, "per_test": per_test,
            "points": points, "counts": data["counts"], "wall": data["wall"],
            # Points found after merging (before the per-test limit), and those merged away
            # as equivalent (a no-op write, a repeat of the same request): before merging,
            # a test had found + merged.
            "found": sum(t.get("found", 0) for t in data["tests"]),
            "merged": sum(sum((t.get("merged") or {}).values()) for t in data["tests"]),
            "points_per_minute": round(points / (data["wall"] / 60), 1) if data["wall"] else 0,
            "findings": len(findings), "real": real, "false_positives": false,
            "unreviewed": unreviewed, "detail": findings}


def rejudge(results: dict[str, Any], reviews: dict[str, Any]) -> None:
    """Apply the reviews to the findings already measured (no run): after reading them."""
    for row in results.get("operators", {}).values():
        for finding in row["detail"]:
            review = reviews.get(finding["key"])
            finding["real"] = None if review is None else bool(review["real"])
            finding["why"] = "" if review is None else review["why"]
        row["real"] = sum(1 for f in row["detail"] if f["real"] is True)
        row["false_positives"] = sum(1 for f in row["detail"] if f["real"] is False)
        row["unreviewed"] = sum(1 for f in row["detail"] if f["real"] is None)


def rate(operators: dict[str, Any], reviews: dict[str, Any]) -> dict[str, Any]:
    """The false-positive rate of the measured runs, and of every finding ever reviewed (the
    runs while the verdicts were being made right: what the fixes were measured against)."""
    findings = sum(o["findings"] for o in operators.values())
    false = sum(o["false_positives"] for o in operators.values())
    reviewed_false = sum(1 for r in reviews.values() if not r["real"])
    return {"findings": findings, "false_positives": false,
            "unreviewed": sum(o["unreviewed"] for o in operators.values()),
            "percent": round(100.0 * false / findings, 1) if findings else 0.0,
            "sieve_percent": 3.5,
            "reviewed": {"findings": len(reviews), "false_positives": reviewed_false,
                         "percent": round(100.0 * reviewed_false / len(reviews), 1)
                         if reviews else 0.0}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="",
                        help="the fault kinds for every operator (default: each its own)")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", default="2")
    parser.add_argument("--only", default=",".join(OPERATORS))
    parser.add_argument("--skip-unsafe", action="store_true")
    parser.add_argument("--rejudge", action="store_true",
                        help="no run: apply the review file to the findings already measured")
    args = parser.parse_args()
    if args.rejudge:
        measured = json.loads((RESULTS / "exploration.json").read_text())
        rejudge(measured, json.loads(REVIEW.read_text()) if REVIEW.exists() else {})
        measured["false_positive_rate"] = rate(measured["operators"],
                                               json.loads(REVIEW.read_text()))
        print(measured["false_positive_rate"])
        save_json(RESULTS / "exploration.json", measured)
        return
    previous = json.loads((RESULTS / "exploration.json").read_text()) \
        if (RESULTS / "exploration.json").exists() else {}
    results: dict[str, Any] = {"limit": args.limit, "seed": args.seed, "workers": args.workers}
    if args.skip_unsafe:
        results["unsafe_example"] = previous.get("unsafe_example")
    else:
        results["unsafe_example"] = unsafe_example()
        print(f"unsafe example: crash point found in "
              f"{results['unsafe_example']['found_in_seconds']} s")
    reviews = json.loads(REVIEW.read_text()) if REVIEW.exists() else {}
    operators = dict(previous.get("operators") or {})
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        kinds = args.kinds or OPERATORS[name][2]
        data = explore(OPERATORS[name][1], kinds, args.limit, args.seed, args.workers)
        operators[name] = judged(name, data, reviews, kinds)
        row = operators[name]
        print(f"{name}: {row['tests']} tests, {row['points']} points in {row['wall']} s "
              f"({row['points_per_minute']} a minute): {row['counts']}; findings "
              f"{row['findings']}, real {row['real']}, false positives "
              f"{row['false_positives']}, unreviewed {row['unreviewed']}")
        for finding in row["detail"]:
            print(f"  [{finding['verdict']}] {finding['key']}: {finding['said'][:160]}")
    results["operators"] = operators
    results["false_positive_rate"] = rate(operators, reviews)
    figures = results["false_positive_rate"]
    print(f"false positives: {figures['false_positives']} of {figures['findings']} findings "
          f"({figures['percent']} %; Sieve: 3.5 %)")
    save_json(RESULTS / "exploration.json", results)


if __name__ == "__main__":
    main()
