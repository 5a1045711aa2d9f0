"""Known public reconcile bugs of real operators, found (or not) by exploration.

Sieve (OSDI 2022) lists the reconcile bugs it found in real operators with the issues and
the commits that fixed them.  This builds each operator (RabbitMQ's cluster operator,
ZooKeeper's operator, DataStax's Cassandra operator) from its released Go module source
(``tests/support/go_modules.py``: the module proxy serves their tagged releases; their code
unchanged, built with this machine's Go, a dependency whose vanity domain is gone replaced
by its new path) at a
release with each bug and the first release with its fix, runs Sieve's workload for that
bug as a test of this framework (``bench/known_bugs/scenario_<operator>.py``) and explores
it with the kind of the bug's pattern, on both releases, with exploration's own points (no
``--envtest-explore-point`` written by hand):

- found: the bug's own point (its ``signature``, the request or change its mechanism hangs
  on) is reported as ``bug`` on the buggy release;
- every finding (a bug, a flaky point, a slow recovery) on either release is read and
  judged: the reviews are ``bench/results/known-bugs-review.json`` (written by hand after
  reading each finding's report, keyed by ``<bug> <version> <label>``, holding in ``read``
  patterns of the finding's text its reader read); a finding with no review, or not the
  one its review read, counts as unreviewed, never as real;
- the false-positive rate: findings judged false, and findings nobody read, over all
  findings.

Acto (SOSP 2023) lists bugs found from the other side, by changing what the user asks for:
those whose effect shows in Kubernetes objects are explored the same way with ``operations``
(pattern ``operation``), the point's finding text naming the bug (``finding``), the time to
the first failing sequence recorded with it.  Two more operators for these: ZooKeeper's from
v0.2.14 on, whose main needs what only a Pod has (the in-cluster namespace file, its own Pod
for a leader lock), run by a main of the bench's (``known_bugs/zookeeper_main.go``: the same
manager and reconciler, no leader lock); OT-CONTAINER-KIT's Redis operator, whose go.mod
names its module ``redis-operator`` (the module proxy serves none of its releases of 2022),
built from the tags of a clone named by ``REDIS_OPERATOR_GIT`` (its git directory; without
it those bugs are "not built", said on stderr).

Writes ``bench/results/known-bugs.json``.  Not in ``make test``: it builds operators from
their sources (a few minutes each, once) and explores for about an hour.

    python -m bench.bench_known_bugs [--only 782,648] [--limit 0] [--workers 1]
    REDIS_OPERATOR_GIT=/path/to/redis-operator/.git python -m bench.bench_known_bugs
    python -m bench.bench_known_bugs --rejudge    # after editing the review file
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import read
from tests.support.go_modules import (
    BuildUnavailable,
    Built,
    build,
    build_from_git,
    cache_root,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
OUTPUT = RESULTS / "known-bugs.json"
REVIEWS = RESULTS / "known-bugs-review.json"
#: Each exploration's summary (every point and its verdict), by issue number and version.
RUNS = RESULTS / "known-bugs-runs"
SCENARIOS = ROOT / "bench" / "known_bugs"


@dataclass(frozen=True)
class Operator:
    """A public operator, built from its Go module: what to build, and how its scenario is
    told where the build is (``<prefix>_SOURCE``, ``<prefix>_BINARY``)."""

    module: str
    scenario: str
    prefix: str
    package: str = "."
    replaces: tuple[tuple[str, str], ...] = ()
    #: A main package of the bench's (a file in bench/known_bugs) built instead of the
    #: operator's own (``go_modules.build(main=...)``).
    main: str = ""
    #: For a module the proxy does not serve: the environment variable naming a git
    #: directory of its repository (a clone), whose tags are built.
    git: str = ""


RABBITMQ = Operator("github.com/rabbitmq/cluster-operator", "scenario_rabbitmq.py", "RMQ")
#: Its releases of 2021 require modules whose vanity domains are gone (the module proxy
#: serves them under their new paths).
ZOOKEEPER = Operator("github.com/pravega/zookeeper-operator", "scenario_zookeeper.py", "ZK",
                     "./cmd/manager", (
                         ("vbom.ml/util", "github.com/fvbommel/util@v0.0.0-20160121211510-"
                                          "db5cfe13f5cc"),
                         ("bou.ke/monkey", "github.com/bouk/monkey@v1.0.1")))
#: From v0.2.14 on its main exits without the in-cluster namespace file and takes a leader
#: lock owned by its own Pod: its manager is started by a main of ours without the lock.
ZOOKEEPER_MAIN = Operator("github.com/pravega/zookeeper-operator", "scenario_zookeeper.py",
                          "ZK", main="zookeeper_main.go")
#: Its go.mod names its module ``redis-operator``: the module proxy serves none of its
#: releases of 2022, so they are built from a clone's tags (``REDIS_OPERATOR_GIT``).
REDIS = Operator("github.com/OT-CONTAINER-KIT/redis-operator", "scenario_redis.py", "REDIS",
                 git="REDIS_OPERATOR_GIT")
#: Its releases before v1.11.0 watch policy/v1beta1 PodDisruptionBudgets (gone since
#: Kubernetes 1.25): their manager stops before its first reconcile here.
CASSANDRA = Operator("github.com/k8ssandra/cass-operator", "scenario_cassandra.py", "CASS")
#: Sieve's published figures, for the README's comparison.
SIEVE = {"bugs": 46, "false_positive_percent": 3.5}
FINDINGS = ("bug", "flaky", "slow recovery")
#: How a review starts that reads a finding true of another behaviour than the known bug.
ANOTHER = "true: another behaviour"


@dataclass(frozen=True)
class KnownBug:
    operator: Operator
    issue: str
    pattern: str
    description: str
    buggy: str
    #: The first release with the fix (None: none published).
    fixed: str | None
    test: str
    kinds: str
    #: A regular expression a finding's label matches when it is this bug's own point.
    signature: str
    #: And one its finding's text matches (an operations point is one per resource: what
    #: it found says which bug it is).
    finding: str = ""

    def own(self, finding: dict[str, Any]) -> bool:
        """Whether ``finding`` is this bug's own point, reporting this bug."""
        return bool(re.search(self.signature, finding["label"])) and (
            not self.finding or bool(re.search(self.finding, finding.get("what", ""))))


BUGS = (
    KnownBug(RABBITMQ, "rabbitmq/cluster-operator#782", "intermediate",
             "killed right after it deletes the StatefulSet during a volume resize, the "
             "fresh instance makes it again from the new template and never expands the "
             "claims", "v1.8.3", "v1.10.0", "test_resize_pvc", "crashes",
             r"^crash after the 1st delete of statefulsets rabbitmq-cluster-server$"),
    KnownBug(RABBITMQ, "rabbitmq/cluster-operator#648", "stale",
             "restarted with a view of the old cluster being deleted after it was made "
             "again, the finalizer deletes the new cluster's StatefulSet (a delete with no "
             "uid precondition)", "v1.6.0", "v1.7.0", "test_recreate", "stale",
             r"^stale view: .* seeing rabbitmqclusters rabbitmq-cluster "),
    KnownBug(RABBITMQ, "rabbitmq/cluster-operator#653", "stale",
             "restarted with a view of the cluster from before its volume was resized, it "
             "deletes the StatefulSet again and tries to shrink the claims", "v1.6.0",
             "v1.7.0", "test_resize_pvc", "stale",
             r"^stale view: .* seeing rabbitmqclusters rabbitmq-cluster "),
    KnownBug(RABBITMQ, "rabbitmq/cluster-operator#758", "unobserved",
             "the scale-up to 3 replicas unobserved (held until the scale-down to 2), it "
             "scales from 1 to 2 and never refuses the scale-down (closed by #828, which "
             "only logs more: no release fixes it, so there is no fixed twin)", "v1.8.3", None,
             "test_scaleup_scaledown", "unobserved",
             r"^unobserved: the \d+(st|nd|rd|th) change of spec\.replicas of rabbitmqclusters "
             r"rabbitmq-cluster "),
    KnownBug(ZOOKEEPER, "pravega/zookeeper-operator#312", "stale",
             "restarted with a view of the old cluster being deleted after it was made again "
             "(its claim made again by the StatefulSet controller), the finalizer lists the "
             "claims by the cluster's name and deletes the new cluster's", "v0.2.9", "v0.2.12",
             "test_recreate", "stale",
             r"^stale view: restarted once persistentvolumeclaims data-zookeeper-cluster-0 is "
             r"made again, seeing zookeeperclusters zookeeper-cluster "),
    KnownBug(ZOOKEEPER, "pravega/zookeeper-operator#314", "stale",
             "restarted with a view of the cluster scaled down, after it was scaled up again, "
             "it scales the StatefulSet down and deletes the new replica's claim as an "
             "orphan (the fix labels the StatefulSet with the cluster's resourceVersion); "
             "its releases use policy/v1beta1 PodDisruptionBudgets, gone since Kubernetes "
             "1.25, so their reconcile never reaches the status the orphan cleanup waits for",
             "v0.2.9", "v0.2.12", "test_scaledown_scaleup", "stale",
             r"^stale view: .* seeing zookeeperclusters zookeeper-cluster "),
    KnownBug(ZOOKEEPER_MAIN, "pravega/zookeeper-operator#474", "operation",
             "Acto's: the annotations of the Services (spec.clientService.annotations and "
             "the others) set when a Service is made and never updated (SyncService copied "
             "its ports and type only); fixed in v0.2.15: the wanted annotations replace "
             "them; both releases run by a main of ours without the leader lock of a Pod, and "
             "v0.2.14's reconcile stops at its policy/v1beta1 PodDisruptionBudget, after the "
             "Services", "v0.2.14", "v0.2.15", "test_service_annotations", "operations",
             r"^spec changes of zookeeperclusters\.zookeeper\.pravega\.io ",
             r"(differential|consistency): .*services <resource>-[\w-]+: "
             r"metadata\.annotations"),
    KnownBug(REDIS, "OT-CONTAINER-KIT/redis-operator#283", "operation",
             "Acto's: a Redis whose kubernetesConfig.resources is left out (or removed) "
             "makes the operator dereference a nil pointer making its StatefulSet: it dies, "
             "and again at each restart; fixed in v0.11.0 (#294)", "v0.10.0", "v0.11.0",
             "test_resources", "operations",
             r"^spec changes of redis\.redis\.redis\.opstreelabs\.in ",
             r"an operator crashed"),
    KnownBug(REDIS, "OT-CONTAINER-KIT/redis-operator#286", "operation",
             "Acto's: a kubernetesConfig.redisSecret with a name and no key (or a key and no "
             "name) makes the operator dereference a nil pointer: it dies, and again at each "
             "restart; fixed in v0.11.0 (#293: the CRD requires both, the apiserver refuses "
             "an incomplete one)", "v0.10.0", "v0.11.0", "test_password_secret", "operations",
             r"^spec changes of redis\.redis\.redis\.opstreelabs\.in ",
             r"an operator crashed"),
    KnownBug(CASSANDRA, "k8ssandra/cass-operator#K8SSAND-559", "stale",
             "restarted with a view of the old datacenter being deleted after it was made "
             "again (its claim made again by the StatefulSet controller), the finalizer lists "
             "the claims by the datacenter's label and deletes the new one's; Sieve found it "
             "at v1.6.0, still so at v1.14.0 (no release fixes it: no fixed twin), tried at "
             "v1.11.0, the first release whose manager starts on Kubernetes 1.25 and later",
             "v1.11.0", None, "test_recreate", "stale",
             r"^stale view: restarted once persistentvolumeclaims server-data-cluster1-"
             r"cassandra-datacenter-default-sts-0 is made again, seeing cassandradatacenters "
             r"cassandra-datacenter "),
    KnownBug(CASSANDRA, "k8ssandra/cass-operator#K8SSAND-1023", "intermediate",
             "killed right after it creates the internode CA's Secret and before the "
             "keystore made from it, the fresh instance finds the CA and never makes the "
             "keystore the Pods mount (fixed in v1.10.0: the keystore is checked on its "
             "own); every release before the fix watches policy/v1beta1 "
             "PodDisruptionBudgets, gone since Kubernetes 1.25, so its manager stops before "
             "its first reconcile here", "v1.9.0", "v1.10.0", "test_recreate", "crashes",
             r"^crash after the 1st create of secrets cassandra-datacenter-ca-keystore$"),
    KnownBug(CASSANDRA, "k8ssandra/cass-operator#K8SSAND-1362", "intermediate",
             "killed right after it labels a Pod Starting, the fresh instance never does "
             "what came next (Sieve, at v1.6.0: the start request to the node's management "
             "API, the node never started; at v1.11.0 the start request comes before the "
             "label, and what is lost is the datacenter's record of the start, "
             "status.lastServerNodeStarted); no release up to v1.14.0 changes it (no fixed "
             "twin); Sieve lists it as pending", "v1.11.0", None, "test_recreate", "crashes",
             r"^crash after the 2nd patch of pods cluster1-cassandra-datacenter-default-sts-0$"),
    KnownBug(CASSANDRA, "k8ssandra/cass-operator#330", "operation",
             "Acto's: a label or annotation removed from additionalServiceConfig stays on the "
             "Service (the update merged the Service's labels and annotations with the ones "
             "wanted); fixed in v1.12.0 (and v1.10.5): the wanted ones replace them",
             "v1.11.0", "v1.12.0", "test_service_config", "operations",
             r"^spec changes of cassandradatacenters\.cassandra\.datastax\.com ",
             r"differential: .*services cluster1-<resource>-[\w-]+: "
             r"metadata\.(labels|annotations)"),
)


def built_operator(operator: Operator, version: str) -> Built:
    """The operator at ``version``, built (once) from the module proxy or a clone's tag."""
    main = SCENARIOS / operator.main if operator.main else None
    if not operator.git:
        return build(operator.module, version, operator.package, operator.replaces, main)
    repository = os.environ.get(operator.git, "")
    if not repository or not Path(repository).exists():
        raise BuildUnavailable(
            f"the module proxy does not serve {operator.module} (its go.mod names another "
            f"module): set {operator.git} to the git directory of a clone of "
            f"https://{operator.module} (its tags are built)")
    return build_from_git(Path(repository), operator.module, version, operator.package, main)


def explore(bug: KnownBug, version: str, limit: int, workers: int) -> dict[str, Any]:
    """One exploration of ``bug``'s workload on ``version``: its summary, minutes, points."""
    operator = bug.operator
    built = built_operator(operator, version)
    scenario = SCENARIOS / operator.scenario
    with tempfile.TemporaryDirectory(prefix="known-bugs-") as folder:
        summary = Path(folder) / "summary.json"
        shutil.copy(scenario, folder)  # run where no conftest or ini of this repository is
        shutil.copy(SCENARIOS / "scenario_support.py", folder)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                   f"{scenario.name}::{bug.test}", f"--envtest-explore={bug.kinds}",
                   f"--envtest-explore-limit={limit}", f"--envtest-explore-json={summary}",
                   f"--basetemp={folder}/tmp"]
        if workers > 1:
            command += ["-n", str(workers)]
        env = {**os.environ, f"{operator.prefix}_SOURCE": str(built.source),
               f"{operator.prefix}_BINARY": str(built.binary)}
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False,
                              timeout=4 * 3600, cwd=folder)
        minutes = (time.monotonic() - started) / 60
        data = json.loads(summary.read_text()) if summary.exists() else {"tests": []}
        if summary.exists():  # every point's outcome, kept for reading the findings
            RUNS.mkdir(parents=True, exist_ok=True)
            shutil.copy(summary, RUNS / f"{bug.issue.rsplit('#', 1)[1]}-{version}.json")
        reports = keep_reports(data, f"{bug.issue.rsplit('#', 1)[1]}-{version}")
    outcomes = [o for test in data["tests"] for o in test["outcomes"]]
    nothing = next((t.get("nothing") for t in data["tests"] if t.get("nothing")), "")
    return {"version": version, "minutes": round(minutes, 1), "points": len(outcomes),
            "counts": data.get("counts", {}), "nothing": nothing,
            "exit": done.returncode, "tail": done.stdout[-1500:] if not outcomes else "",
            "findings": [{"label": o["point"]["label"], "verdict": o["verdict"],
                          "spec": o["point"]["spec"],
                          "what": (o.get("error") or "; ".join(o.get("findings") or [])
                                   or o.get("reason") or "")[:400],
                          "report": reports.get(o["point"]["spec"], ""),
                          **({"sequence": o.get("sequence", ""), "trials": o.get("trials"),
                              "first_failure_after_s": o.get("first_failure_after")}
                             if o.get("sequence") else {})}
                         for o in outcomes if o["verdict"] in FINDINGS]}


def keep_reports(data: dict[str, Any], run: str) -> dict[str, str]:
    """Copy each finding's report (its logs, API calls, timeline) out of the run's temporary
    folder into the build cache, for reading it; spec -> where it is now."""
    kept = {}
    for test in data.get("tests", []):
        for outcome in test.get("outcomes", []):
            if outcome["verdict"] not in FINDINGS or not outcome.get("artifacts"):
                continue  # a slow recovery passed: no report (and Path("") is the cwd)
            source = Path(outcome["artifacts"])
            if not source.is_dir():
                continue
            target = cache_root() / "reports" / run / source.name[:120]
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)
            kept[outcome["point"]["spec"]] = str(target)
    return kept


def judged(bug: KnownBug, run: dict[str, Any], reviews: dict[str, Any]) -> list[dict]:
    """The run's findings, each with the verdict its review gave after reading it."""
    found = []
    for finding in run["findings"]:
        key = f"{bug.issue} {run['version']} {finding['label']}"
        written = reviews.get(key)
        # A review counts for the finding its reader read (``read``: bench.common.read).
        review = read(written, finding["what"]) if written else {}
        own = run["version"] == bug.buggy and bug.own(finding)
        verdict = review.get("verdict", "")
        if not verdict or verdict.startswith("unreviewed"):
            verdict = ("true: the known bug's own point" if own and finding["verdict"] == "bug"
                       else "unreviewed")
        found.append({**finding, "version": run["version"], "verdict_after_reading": verdict,
                      "why": review.get("why", "")})
    return found


def entry(bug: KnownBug, buggy: dict[str, Any], fixed: dict[str, Any] | None,
          reviews: dict[str, Any]) -> dict[str, Any]:
    findings = judged(bug, buggy, reviews) + (judged(bug, fixed, reviews) if fixed else [])
    found = any(f["version"] == bug.buggy and f["verdict"] == "bug" and bug.own(f)
                for f in findings)
    on_fixed = [f for f in findings if fixed and f["version"] == bug.fixed]
    # A finding on the fixed release read true of another behaviour than the bug (Redis's
    # v0.11.0 accepts limits below requests and its StatefulSet is refused at every
    # reconcile) is the fixed release's, not its bug's: counted apart, never as silence.
    other = [f for f in on_fixed if f["verdict_after_reading"].startswith(ANOTHER)]
    fixed_findings = [f for f in on_fixed if f not in other]
    return {
        "operator": bug.operator.module, "bug": bug.issue, "pattern": bug.pattern,
        "description": bug.description, "buggy_version": bug.buggy,
        "fixed_version": bug.fixed, "found": bool(found),
        "minutes": round(buggy["minutes"] + (fixed["minutes"] if fixed else 0.0), 1),
        "points": buggy["points"] + (fixed["points"] if fixed else 0),
        "buggy_run": {k: v for k, v in buggy.items() if k != "findings"},
        "fixed_run": {k: v for k, v in fixed.items() if k != "findings"} if fixed else None,
        "fixed_findings": len(fixed_findings),
        "fixed_other_true": len(other),
        "fixed_false_positives": sum(1 for f in fixed_findings
                                     if f["verdict_after_reading"].startswith("false")),
        "findings": findings,
    }


def rate(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Findings judged false over all findings; a finding nobody read counts as false (the
    rate read 0.0 % while four were unread)."""
    findings = [f for e in entries for f in e["findings"]]
    false = sum(1 for f in findings if f["verdict_after_reading"].startswith("false"))
    unreviewed = sum(1 for f in findings if f["verdict_after_reading"] == "unreviewed")
    counted = false + unreviewed
    return {"findings": len(findings), "false_positives": counted, "unreviewed": unreviewed,
            "percent": round(100.0 * counted / len(findings), 1) if findings else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="bugs by issue number, e.g. 782,648")
    parser.add_argument("--limit", type=int, default=0, help="points per exploration (0: all)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rejudge", action="store_true",
                        help="judge the runs in known-bugs.json again with the reviews")
    args = parser.parse_args(argv)
    reviews = json.loads(REVIEWS.read_text()) if REVIEWS.exists() else {}
    chosen = [b for b in BUGS if not args.only
              or b.issue.rsplit("#", 1)[1] in args.only.split(",")]
    previous = json.loads(OUTPUT.read_text()) if OUTPUT.exists() else {"bugs": []}
    kept = {e["bug"]: e for e in previous.get("bugs", [])}
    for bug in chosen:
        if args.rejudge and bug.issue in kept:
            old = kept[bug.issue]
            buggy = {**old["buggy_run"], "findings": [f for f in old["findings"]
                                                      if f["version"] == bug.buggy]}
            fixed = ({**old["fixed_run"], "findings": [f for f in old["findings"]
                                                       if f["version"] == bug.fixed]}
                     if old.get("fixed_run") else None)
        else:
            try:
                buggy = explore(bug, bug.buggy, args.limit, args.workers)
                fixed = explore(bug, bug.fixed, args.limit, args.workers) if bug.fixed \
                    else None
            except BuildUnavailable as why:
                print(f"{bug.issue}: not built: {why}", file=sys.stderr)
                continue
        kept[bug.issue] = entry(bug, buggy, fixed, reviews)
        line = kept[bug.issue]
        print(f"{bug.issue} ({bug.pattern}): found={line['found']} points={line['points']} "
              f"minutes={line['minutes']} fixed findings={line['fixed_findings']}", flush=True)
        document = write(kept)  # after each bug: an interrupted run loses nothing done
    document = write(kept)
    print(f"found {document['found']}; false positives: {document['false_positive_rate']}")
    return 0


def write(kept: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Write known-bugs.json with the bugs explored so far (in the table's order)."""
    entries = [kept[b.issue] for b in BUGS if b.issue in kept]
    document = {"sieve": SIEVE, "go": subprocess.run(
        ["go", "version"], capture_output=True, text=True, check=False,
        env={**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/local/go/bin"}
    ).stdout.strip(), "bugs": entries, "false_positive_rate": rate(entries),
        "found": f"{sum(e['found'] for e in entries)}/{len(entries)}"}
    RESULTS.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(document, indent=1) + "\n")
    return document


if __name__ == "__main__":
    raise SystemExit(main())
