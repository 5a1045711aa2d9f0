"""``make demo``: the seed's scenario on a local control plane, with and without the gate.

Starts a control plane (etcd + kube-apiserver, binaries from the cache), installs the Ray CRDs
and, twice, in a fresh namespace each time, runs the Ray operator in a thread as its own user
under the ClusterRole it ships: once with the head-Pod gate (KubeRay after the seed's change) and
once without (``serve_gate="none"``, before it). Each time the sample RayService is created, the
Pod simulator brings the head Pod up after a delay and the fake Dashboard answers after that
(``bench/scenario.py``, the same scenario test 2 and the bench measure). The timeline is printed
as it happens: Pod phases, Dashboard requests, status writes (from the audit log), promotion.
It ends with the two status-write counts side by side, writes the timeline as a self-contained
HTML page with an SVG chart and prints the total wall time.

    python -m bench.demo [--html PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
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

RESULTS = ROOT / "bench" / "results"
DESCRIPTION = {"head-pod": "with the gate (after the seed's change)",
               "none": "without the gate (before it)"}
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
        meta = {"kubernetes_version": control_plane.version}
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


# -- the chart ------------------------------------------------------------------------------

TRACKS = ((POD, "head Pod"), (DASHBOARD, "Dashboard"), (STATUS_WRITE, "status writes"),
          (STATUS, "RayService"))
COLORS = {POD: "#0e7490", DASHBOARD: "#15803d", STATUS_WRITE: "#dc2626", STATUS: "#7e22ce",
          OBJECT: "#6b7280"}


def render_html(results: list[ScenarioResult], timing: Timing, meta: dict[str, Any]) -> str:
    left, right, width = 150, 90, 1180
    track_h, lane_gap, top = 34, 46, 40
    plot_w = width - left - right
    end = max(max((e.t for e in r.events), default=0.0) for r in results) + 0.5
    scale = plot_w / end

    def x(t: float) -> float:
        return left + max(0.0, t) * scale

    lane_h = track_h * len(TRACKS)
    height = top + len(results) * (lane_h + lane_gap) + 12
    svg: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" font-family="system-ui, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    step = 1 if end <= 25 else 2
    for second in range(0, int(end) + 1, step):
        gx = x(second)
        svg.append(f'<line x1="{gx:.1f}" y1="{top - 8}" x2="{gx:.1f}" y2="{height - 32}" '
                   'stroke="#e5e7eb"/>')
        svg.append(f'<text x="{gx:.1f}" y="{height - 18}" text-anchor="middle" '
                   f'fill="#6b7280">{second}s</text>')
    svg.append(f'<text x="{left + plot_w}" y="{height - 2}" text-anchor="end" '
               'fill="#6b7280">seconds since the RayService was created</text>')
    for index, result in enumerate(results):
        y0 = top + index * (lane_h + lane_gap)
        gate = result.label.split("=", 1)[1]
        title = "with the gate" if gate == "head-pod" else "without the gate"
        svg.append(f'<text x="8" y="{y0 - 8}" font-weight="bold" font-size="14">{title} '
                   f'<tspan font-weight="normal" fill="#6b7280">({html.escape(result.label)})'
                   '</tspan></text>')
        spans = [
            (result.head_created_at or 0.0, result.head_ready_at, "#f3f4f6",
             "head Pod not Ready"),
            (result.head_ready_at, result.dashboard_up_at, "#ffedd5", "Dashboard refusing"),
            (result.dashboard_up_at, result.running_at, "#e0f2fe", "Serve deploying"),
        ]
        for start, stop, fill, label in spans:
            if start is None or stop is None or stop <= start:
                continue
            svg.append(f'<rect x="{x(start):.1f}" y="{y0}" width="{x(stop) - x(start):.1f}" '
                       f'height="{lane_h}" fill="{fill}"><title>{label}: {start:.1f}-{stop:.1f}s'
                       '</title></rect>')
        for row, (kind, name) in enumerate(TRACKS):
            ty = y0 + row * track_h
            svg.append(f'<line x1="{left}" y1="{ty + track_h:.1f}" x2="{left + plot_w}" '
                       f'y2="{ty + track_h:.1f}" stroke="#d1d5db" stroke-dasharray="2,3"/>')
            svg.append(f'<text x="{left - 10}" y="{ty + track_h / 2 + 4:.1f}" '
                       f'text-anchor="end" fill="{COLORS[kind]}">{name}</text>')
            svg.extend(_marks(result, kind, ty, track_h, x, left + plot_w))
        svg.append(f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{lane_h}" fill="none" '
                   'stroke="#9ca3af"/>')
        svg.append(f'<text x="{left + plot_w + 10}" y="{y0 + lane_h / 2 - 4}" font-size="26" '
                   f'font-weight="bold" fill="{COLORS[STATUS_WRITE]}">'
                   f'{result.status_writes}</text>')
        svg.append(f'<text x="{left + plot_w + 10}" y="{y0 + lane_h / 2 + 14}" '
                   'fill="#6b7280">status writes</text>')
    svg.append("</svg>")

    rows = "".join(
        f"<tr><td>{html.escape(r.label)}</td><td><b>{r.status_writes}</b></td>"
        f"<td>{r.refused_calls}</td><td>{r.dashboard_requests}</td><td>{r.serve_submissions}</td>"
        f"<td>{_fmt(r.head_ready_at)}</td><td>{_fmt(r.dashboard_up_at)}</td>"
        f"<td>{_fmt(r.running_at)}</td></tr>" for r in results)
    details = "".join(
        f"<details><summary>{html.escape(r.label)}: all {len(r.events)} events</summary><pre>"
        + html.escape("\n".join(f"{e.t:7.2f}s  {e.kind:<12} {e.text}  {e.detail}"
                                for e in r.events))
        + "</pre></details>" for r in results)
    scenario = (f"Each Ray Pod is Pending for {timing.head_running_after:g} s, then Running but "
                f"not Ready for {timing.head_ready_after:g} s, then Ready; the Dashboard refuses "
                f"connections until {timing.dashboard_after:g} s after the head Pod is Ready; "
                f"Serve applications report DEPLOYING/UPDATING for "
                f"{timing.serve_ready_after:g} s after submission.")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>RayService status writes: with and without the head-Pod gate</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #111827; }}
table {{ border-collapse: collapse; margin: 12px 0; }}
td, th {{ border: 1px solid #d1d5db; padding: 4px 10px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.legend span {{ margin-right: 18px; }}
pre {{ font-size: 12px; background: #f9fafb; padding: 8px; }}
</style></head><body>
<h1>RayService status writes until Running: {' vs '.join(str(r.status_writes) for r in results)}
</h1>
<p>{html.escape(scenario)} Status writes are the operator's <code>update</code>/<code>patch</code>
of <code>rayservices/status</code> in the kube-apiserver audit log, from creation until
<code>serviceStatus</code> was <code>Running</code>. KubeRay measured 47 before the seed's change
and 13 after it.</p>
<p class="legend">
<span style="color:{COLORS[POD]}">● head Pod phase</span>
<span style="color:{COLORS[DASHBOARD]}">◆ Dashboard request answered (large: Serve config PUT)
</span><span style="color:#b91c1c">◇ Dashboard call refused</span>
<span style="color:{COLORS[STATUS_WRITE]}">▮ status write (orange: 409 conflict)</span>
<span style="color:{COLORS[STATUS]}">▼ RayService status change</span><br>
<span><span style="background:#f3f4f6">&nbsp;&nbsp;&nbsp;&nbsp;</span> head Pod not Ready</span>
<span><span style="background:#ffedd5">&nbsp;&nbsp;&nbsp;&nbsp;</span> head Pod Ready, Dashboard
refusing</span>
<span><span style="background:#e0f2fe">&nbsp;&nbsp;&nbsp;&nbsp;</span> Dashboard answering, Serve
deploying</span></p>
{''.join(svg)}
<table><tr><th>run</th><th>status writes</th><th>Dashboard calls refused</th>
<th>Dashboard requests answered</th><th>Serve submissions</th><th>head Ready</th>
<th>Dashboard up</th><th>Running</th></tr>
{rows}</table>
{details}
<p style="color:#6b7280">Kubernetes {html.escape(str(meta.get('kubernetes_version')))};
generated {html.escape(meta.get('generated', ''))} by <code>python -m bench.demo</code>.</p>
</body></html>
"""


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _marks(result: ScenarioResult, kind: str, ty: float, h: float, x: Any,
           limit: float) -> list[str]:
    color = COLORS[kind]
    marks: list[str] = []
    mid = ty + h / 2
    for event in (e for e in result.events if e.kind == kind):
        ex = x(event.t)
        tip = html.escape(f"{event.t:.2f}s {event.text} {event.detail}")
        if kind == STATUS_WRITE:
            fill = "#f97316" if "409" in event.detail else color
            marks.append(f'<rect x="{ex - 2:.1f}" y="{ty + 4}" width="4" height="{h - 8}" '
                         f'fill="{fill}"><title>{tip}</title></rect>')
        elif kind == DASHBOARD:
            if event.text == "Dashboard answering":
                marks.append(f'<line x1="{ex:.1f}" y1="{ty + 2}" x2="{ex:.1f}" y2="{ty + h - 2}" '
                             f'stroke="{color}" stroke-width="2"><title>{tip}</title></line>')
                continue
            size = 7 if "PUT" in event.detail else 4
            refused = "refused" in event.text
            paint = ('fill="#ffffff" stroke="#b91c1c" stroke-width="1.5"' if refused
                     else f'fill="{color}" fill-opacity="0.8"')
            marks.append(f'<path d="M{ex:.1f},{mid - size:.1f} L{ex + size:.1f},{mid:.1f} '
                         f'L{ex:.1f},{mid + size:.1f} L{ex - size:.1f},{mid:.1f} Z" '
                         f'{paint}><title>{tip}</title></path>')
        elif kind == POD:
            marks.append(f'<circle cx="{ex:.1f}" cy="{mid:.1f}" r="5" fill="{color}">'
                         f'<title>{tip}</title></circle>')
            marks.append(f'<text x="{ex + 7:.1f}" y="{mid + 4:.1f}" font-size="10" '
                         f'fill="{color}">{html.escape(event.text.replace("head Pod ", ""))}'
                         '</text>')
        elif kind == STATUS:
            marks.append(f'<path d="M{ex - 5:.1f},{ty + 4} L{ex + 5:.1f},{ty + 4} '
                         f'L{ex:.1f},{ty + 12} Z" fill="{color}"><title>{tip}</title></path>')
    if kind == STATUS:
        marks.extend(_status_labels(result, ty, x, limit))
    return marks


def _status_labels(result: ScenarioResult, ty: float, x: Any, limit: float) -> list[str]:
    """serviceStatus changes and the promotion as text, in two rows so neighbours do not
    overlap; a promotion and Running at the same moment share one label."""
    labels: list[tuple[float, str]] = []
    for event in (e for e in result.events if e.kind == STATUS):
        if event.text.startswith("serviceStatus "):
            text = event.text.removeprefix("serviceStatus ")
        elif event.text.startswith("promoted"):
            text = "promoted"
        else:
            continue
        if labels and abs(labels[-1][0] - event.t) < 0.2 and "promoted" in (text, labels[-1][1]):
            labels[-1] = (labels[-1][0], "Running (promoted)")
            continue
        labels.append((event.t, text))
    rows_end = [float("-inf"), float("-inf")]
    out = []
    for t, text in labels:
        width = 5.6 * len(text)
        lx, anchor = x(t) + 2, "start"
        if lx + width > limit:  # at the right edge: end the label at its mark
            lx, anchor = x(t) - 2 - width, "end"
        row = 0 if lx > rows_end[0] else 1 if lx > rows_end[1] else 0
        rows_end[row] = lx + width + 4
        tx = lx + width if anchor == "end" else lx
        out.append(f'<text x="{tx:.1f}" y="{ty + 22 + 10 * row}" font-size="10" '
                   f'text-anchor="{anchor}" fill="{COLORS[STATUS]}">{html.escape(text)}</text>')
    return out


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
    args.html.write_text(render_html(results, timing, meta))
    args.html.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "timing": timing.__dict__, "runs": [r.as_dict() for r in results]},
        indent=2) + "\n")
    console.print(f"chart: {args.html}")
    console.print(f"total wall time: {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
