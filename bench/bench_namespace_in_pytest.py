"""What the ``namespace`` fixture costs a test inside pytest, not only the calls it makes.

``bench_fixtures`` times the fixture's work (create the namespace, hand it to the
background reaper: 5.6 ms) outside pytest.  A test pays more: the fixture
chain (``envtest_entry``, the test's context and its audit mark, ``make_namespace``),
pytest's own per-test work and the teardown.  This runs an inner pytest session
of interleaved tests, half asking for ``namespace`` and half asking for
nothing, after one warm-up test that starts the control plane, and reports
the medians of setup + call + teardown per test (pytest's own durations).

    python -m bench.bench_namespace_in_pytest [--tests 40] [--runs 3] [--out NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.common import RESULTS, save_json, spread

CONFTEST = textwrap.dedent('''
    import json
    import os

    def pytest_runtest_logreport(report):
        with open(os.environ["BENCH_DURATIONS"], "a") as out:
            out.write(json.dumps([report.nodeid, report.when, report.duration]) + "\\n")
''')


def inner_tests(count: int) -> str:
    """A warm-up test, then ``count`` tests alternating: with the namespace, with nothing."""
    lines = ["def test_000_warm_up(namespace):\n    pass\n"]
    for index in range(count):
        lines.append(f"def test_{index:03d}_namespace(namespace):\n    pass\n")
        lines.append(f"def test_{index:03d}_plain():\n    pass\n")
    return "\n\n".join(lines)


def one_run(count: int) -> dict[str, list[float]]:
    """Per-test seconds (setup + call + teardown) of one inner session, by kind."""
    with tempfile.TemporaryDirectory(prefix="bench-namespace-") as scratch:
        root = Path(scratch)
        (root / "conftest.py").write_text(CONFTEST)
        (root / "test_bench.py").write_text(inner_tests(count))
        durations = root / "durations.jsonl"
        env = {**os.environ, "BENCH_DURATIONS": str(durations)}
        env.pop("PYTEST_ADDOPTS", None)
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 "-p", "no:randomly", str(root / "test_bench.py")], cwd=root,
                                env=env, capture_output=True, text=True, timeout=600, check=False)
        if result.returncode != 0:
            raise SystemExit(f"the inner session failed:\n{result.stdout[-3000:]}")
        per_test: dict[str, float] = {}
        for line in durations.read_text().splitlines():
            nodeid, _, seconds = json.loads(line)
            per_test[nodeid] = per_test.get(nodeid, 0.0) + seconds
    kinds: dict[str, list[float]] = {"namespace": [], "plain": []}
    for nodeid, seconds in per_test.items():
        for kind in kinds:
            if nodeid.endswith(f"_{kind}"):
                kinds[kind].append(seconds)
    return kinds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=40, help="tests of each kind per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default="namespace-in-pytest.json")
    args = parser.parse_args()
    namespace: list[float] = []
    plain: list[float] = []
    medians = []
    for _ in range(args.runs):
        kinds = one_run(args.tests)
        namespace += kinds["namespace"]
        plain += kinds["plain"]
        medians.append(round(statistics.median(kinds["namespace"]) * 1000, 2))
    results = {
        "load_average": os.getloadavg(),
        "namespace_test_ms": spread([s * 1000 for s in namespace], 2),
        "plain_test_ms": spread([s * 1000 for s in plain], 2),
        "namespace_overhead_ms_median": round(
            (statistics.median(namespace) - statistics.median(plain)) * 1000, 2),
        "namespace_test_ms_median_per_run": medians,
        "namespace_test_ms_samples": [round(s * 1000, 2) for s in namespace],
        "plain_test_ms_samples": [round(s * 1000, 2) for s in plain],
    }
    save_json(RESULTS / args.out, results)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
