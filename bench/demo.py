"""``make demo``: the seed's scenario on a local control plane, with and without the gate.

Starts a control plane (etcd + kube-apiserver, binaries from the cache), installs the Ray CRDs
and, twice, in a fresh namespace each time, runs the Ray operator in a thread as its own user
under the ClusterRole it ships: once with the head-Pod gate (KubeRay after the seed's change) and
once without (``serve_gate="none"``, before it). Each time the sample RayService is created, the
Pod simulator brings the head Pod up after a delay and the fake Dashboard answers after that
(``bench/scenario.py``, the same scenario test 2 and the bench measure). The timeline is printed
as it happens: Pod phases, Dashboard requests, status writes (from the audit log), promotion.
It ends with the two status-write counts side by side, writes the timeline with the framework's
own timeline report (``envtest.write_report``, one section per run on one time scale: the
writes judged, redundant ones in orange).  Then, where Go is there, the same scenario on the
real ray-operator v0.5.0 and v0.6.0 (``bench_kuberay_real``: built once, its Dashboard calls
served by the ``services`` fixture), and the total wall time.

    python -m bench.demo [--html PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from envtest import ConsoleProgress, ControlPlane, install_crds
from tests.support.ray_scenario import (
    CRDS,
    DASHBOARD,
    GATES,
    OBJECT,
    POD,
    ROOT,
    STATUS,
    STATUS_WRITE,
    Event,
    ScenarioResult,
    Timing,
    operator_stage,
)
from tests.support.ray_timeline import DESCRIPTION, write_chart

RESULTS = ROOT / "bench" / "results"
STYLE = {POD: "cyan", DASHBOARD: "green", STATUS_WRITE: "bold yellow", STATUS: "magenta",
         OBJECT: "dim"}
# Milestones of a run, for the progress bar.
MILESTONES = ("RayService created", "pending cluster named", "head Pod Pending",
              "head Pod Running", "head Pod Ready", "Dashboard answering",
              "Serve config submitted", "promoted pending -> active", "serviceStatus Running")


class LiveRun:
    """Prints a run's events as they arrive and keeps its progress bar current."""

    def __init__(self, console: Console, progress: Progress, gate: str) -> None:
        self.console = console
        self.progress = progress
        self.task = progress.add_task(f"serve_gate={gate}", total=len(MILESTONES),
                                      phase="starting", writes=0)
        self.reached: set[str] = set()

    def on_event(self, event: Event) -> None:
        style = "red" if "refused" in event.text else STYLE.get(event.kind, "")
        text = f"{event.text:<28}"
        if event.kind == STATUS_WRITE:
            text = f"▲ {event.text:<26}"
        self.console.print(f"  [dim]{event.t:6.2f}s[/]  [{style}]{event.kind:<12} {text}[/] "
                           f"[dim]{escape(event.detail)}[/]", highlight=False)
        if event.text in MILESTONES and event.text not in self.reached:
            self.reached.add(event.text)
            self.progress.update(self.task, completed=len(self.reached), phase=event.text)

    def on_tick(self, result: ScenarioResult, status: dict[str, Any]) -> None:
        self.progress.update(self.task, writes=len(result.status_write_times))


def run_demo(console: Console, timing: Timing) -> tuple[list[ScenarioResult], dict[str, Any]]:
    results: list[ScenarioResult] = []
    users: list[str] = []
    steps = ConsoleProgress(console)
    control_plane = ControlPlane(progress=steps)
    with steps.step("starting the control plane (etcd + kube-apiserver)"):
        control_plane.start()
    with control_plane:
        console.print(f"[dim]Kubernetes {control_plane.version} at {control_plane.server}[/]")
        with steps.step("installing the Ray CRDs"):
            install_crds(control_plane.api_client(), [CRDS])
        for index, gate in enumerate(GATES, 1):
            console.rule(f"run {index}/{len(GATES)}: serve_gate={gate}, {DESCRIPTION[gate]}")
            with operator_stage(control_plane, gate, timing) as stage:
                console.print(f"[dim]namespace {stage.namespace}; operator user {stage.user} "
                              "(ClusterRole ray-operator)[/]")
                progress = Progress(
                    SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                    TextColumn("{task.fields[phase]:<28}"),
                    TextColumn("status writes [bold yellow]{task.fields[writes]}"),
                    TimeElapsedColumn(), console=console, transient=True)
                with progress:
                    live = LiveRun(console, progress, gate)
                    result = stage.run(control_plane, timing, on_event=live.on_event,
                                       on_tick=live.on_tick)
            console.print(f"[bold]serve_gate={gate}: Running after {result.duration:.1f} s with "
                          f"[yellow]{result.status_writes}[/] status writes[/]")
            results.append(result)
            users.append(stage.user)
        meta = {"kubernetes_version": control_plane.version, "operator_users": users}
    return results, meta


def summary_table(results: list[ScenarioResult]) -> Table:
    by_gate = {r.label.split("=", 1)[1]: r for r in results}
    gated, legacy = by_gate["head-pod"], by_gate["none"]
    table = Table(title="The seed's scenario, side by side")
    table.add_column("")
    table.add_column("with the gate", justify="right")
    table.add_column("without the gate", justify="right")

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} s"

    rows = [
        ("[bold]rayservices/status writes until Running[/]",
         f"[bold yellow]{gated.status_writes}[/]", f"[bold yellow]{legacy.status_writes}[/]"),
        ("  of them before the head Pod was Ready",
         str(_before(gated, gated.head_ready_at)), str(_before(legacy, legacy.head_ready_at))),
        ("  of them saying nothing new (timestamps at most)",
         str(gated.noise_only_status_writes), str(legacy.noise_only_status_writes)),
        ("Dashboard calls refused (connection refused)", str(gated.refused_calls),
         str(legacy.refused_calls)),
        ("  of them before the head Pod was Ready",
         str(_before_t(gated.refused_call_times, gated.head_ready_at)),
         str(_before_t(legacy.refused_call_times, legacy.head_ready_at))),
        ("Dashboard requests answered", str(gated.dashboard_requests),
         str(legacy.dashboard_requests)),
        ("Serve config submissions answered", str(gated.serve_submissions),
         str(legacy.serve_submissions)),
        ("head Pod Ready at", seconds(gated.head_ready_at), seconds(legacy.head_ready_at)),
        ("Dashboard answering at", seconds(gated.dashboard_up_at),
         seconds(legacy.dashboard_up_at)),
        ("Running (promoted) at", seconds(gated.running_at), seconds(legacy.running_at)),
        ("KubeRay's figures (cluster initialisation)", "13", "47"),
    ]
    for row in rows:
        table.add_row(*row)
    return table


def _before(result: ScenarioResult, t: float | None) -> int:
    return _before_t(result.status_write_times, t)


def _before_t(times: list[float], t: float | None) -> int:
    return sum(1 for w in times if t is not None and w < t)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=RESULTS / "demo-timeline.html",
                        help="where to write the chart (default bench/results/demo-timeline.html)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    # Not a terminal (CI, a pipe): plain lines, wide enough that events do not wrap.
    wide = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120
    console = Console(highlight=False, width=wide)
    timing = Timing()
    console.rule("[bold]pytest-envtest demo: a RayService gated on its head Pod (KubeRay's seed "
                 "change)")
    console.print(f"Scenario: each Ray Pod Pending {timing.head_running_after:g} s, Running "
                  f"(not Ready) {timing.head_ready_after:g} s, then Ready; the fake Dashboard "
                  f"answers {timing.dashboard_after:g} s after the head Pod is Ready; Serve apps "
                  f"are healthy {timing.serve_ready_after:g} s after submission.")
    results, meta = run_demo(console, timing)
    meta["generated"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

    console.rule("result")
    console.print(summary_table(results))
    gated, legacy = results
    console.print(f"status writes: with the gate [bold yellow]{gated.status_writes}[/], without "
                  f"it [bold yellow]{legacy.status_writes}[/] "
                  f"({legacy.status_writes / max(gated.status_writes, 1):.1f}x)")
    args.html.parent.mkdir(parents=True, exist_ok=True)
    write_chart(args.html, results, meta["operator_users"], timing, meta)
    args.html.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "timing": timing.__dict__, "runs": [r.as_dict() for r in results]},
        indent=2) + "\n")
    console.print(f"chart: {args.html}")
    real_kuberay(console)
    console.print(f"total wall time: {time.monotonic() - started:.1f} s")
    return 0


def real_kuberay(console: Console) -> None:
    """The same scenario on the real ray-operator v0.5.0 and v0.6.0, built from their Go
    modules where Go is there (said why not where it is not): one run each, the operator's
    Dashboard calls served by the ``services`` fixture, its timeline drawn with noise."""
    from tests.support.go_modules import BuildUnavailable
    from tests.support.kuberay_real import builds, medians, run_scenario

    console.rule("[bold]the seed on the real KubeRay: ray-operator v0.5.0 and v0.6.0")
    try:
        built = builds(say=console.print)
    except BuildUnavailable as why:
        console.print(f"skipped: the real KubeRay cannot be built here: {why}")
        return
    rows = medians(run_scenario(built, 1, [3.0], reports=RESULTS, say=console.print))
    table = Table("ray-operator", "status writes", "only timestamps", "Dashboard calls",
                  "refused", "before head Ready", "promoted after")
    for row in rows:
        table.add_row(row["version"], f"{row['status_writes']:g}",
                      f"{row['timestamp_only_writes']:g}", f"{row['dashboard_calls']:g}",
                      f"{row['dashboard_refused']:g}", f"{row['calls_before_head_ready']:g}",
                      f"{row['seconds_to_promotion']:g} s")
    console.print(table)
    console.print(f"timelines (timestamp-only writes as redundant): "
                  f"{RESULTS / 'kuberay-real-v0.5.0-3s.html'}, "
                  f"{RESULTS / 'kuberay-real-v0.6.0-3s.html'}")


if __name__ == "__main__":
    sys.exit(main())
