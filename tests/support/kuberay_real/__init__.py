"""The real KubeRay operators (ray-operator v0.5.0, before the seed's change, and v0.6.0,
after it), built from their Go modules, and the seed's scenario run on them.

``builds`` builds both once (``go_modules``: cached like the binaries); ``run_scenario``
runs ``scenario_kuberay.py`` (an ordinary pytest file of this framework: ``run_operator``,
``pod_simulator``, ``services`` for the Dashboard, ``api_calls``) in a folder of its own and
returns each run's figures; ``medians`` makes a row per version and delay.  Used by
``bench/bench_kuberay_real.py``, ``make demo`` and the reliability test.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.go_modules import Built, build

MODULE = "github.com/ray-project/kuberay/ray-operator"
VERSIONS = ("v0.5.0", "v0.6.0")
SCENARIO = Path(__file__).resolve().parent / "scenario_kuberay.py"
#: The figures each row gives as the median of its runs.
FIGURES = ("status_writes", "timestamp_only_writes", "stored_nothing", "dashboard_calls",
           "dashboard_refused", "calls_before_head_ready", "seconds_to_promotion")


def builds(say: Any = print) -> dict[str, Built]:
    """Both releases, built (or found built); :class:`BuildUnavailable` says why not."""
    found = {}
    for version in VERSIONS:
        started = time.monotonic()
        found[version] = build(MODULE, version)
        say(f"ray-operator {version}: {found[version].binary} "
            f"({time.monotonic() - started:.0f} s)")
    return found


def run_scenario(built: dict[str, Built], runs: int, delays: list[float],
                 reports: Path | None = None, say: Any = print) -> list[dict[str, Any]]:
    """Every run's row, from one pytest session of the scenario."""
    with tempfile.TemporaryDirectory(prefix="kuberay-real-") as folder:
        shutil.copy(SCENARIO, folder)  # run where no conftest or ini of this repository is
        results = Path(folder) / "rows.jsonl"
        env = {**os.environ,
               "KUBERAY_BUILDS": json.dumps({v: {"binary": str(b.binary),
                                                 "source": str(b.source)}
                                             for v, b in built.items()}),
               "KUBERAY_DELAYS": ",".join(f"{d:g}" for d in delays),
               "KUBERAY_RUNS": str(runs), "KUBERAY_RESULTS": str(results)}
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v",
                   SCENARIO.name, f"--basetemp={folder}/tmp", "--envtest-report-noise=*Time",
                   "-W", "ignore:.*nothing serves"]
        if reports is not None:
            command.append(f"--envtest-report={folder}/reports")
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder,
                              check=False, timeout=3600)
        for line in done.stdout.splitlines():
            if "::test_rayservice_comes_up[" in line:
                say(line.split("::", 1)[1])
        if done.returncode != 0:
            raise RuntimeError(f"the scenario failed (exit {done.returncode}):\n"
                               f"{done.stdout[-4000:]}{done.stderr[-2000:]}")
        if reports is not None:
            reports.mkdir(parents=True, exist_ok=True)
            longest = f"{max(delays):g}s"
            for html in sorted(Path(folder, "reports").glob(f"*run{runs}-*-{longest}_.html")):
                version = next(v for v in VERSIONS if v in html.name)
                shutil.copy(html, reports / f"kuberay-real-{version}-{longest}.html")
        return [json.loads(line) for line in results.read_text().splitlines() if line]


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per version and delay: the median of each figure over its runs."""
    table = []
    for delay in sorted({r["head_delay_s"] for r in rows}):
        for version in VERSIONS:
            mine = [r for r in rows if r["version"] == version and r["head_delay_s"] == delay]
            if not mine:
                continue
            row: dict[str, Any] = {"version": version, "head_delay_s": delay}
            for figure in FIGURES:
                row[figure] = statistics.median(r[figure] for r in mine)
            row["runs"] = {figure: [r[figure] for r in mine] for figure in FIGURES}
            row["paths"] = sorted({p for r in mine for p in r["paths"]})
            table.append(row)
    return table
