"""The seed's scenario as the framework's timeline report: one section per gate setting.

``make demo`` (``bench/demo.py``) writes it after its runs and
``tests/operator/test_status_writes.py`` checks it, so the chart the README
shows is the one the test asserts on.  No drawing code of its own: the
sections are ``envtest.TimelineInput``s rendered by ``envtest.write_report``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from envtest import TimelineInput, TimelineMark, TimelineSpan, write_report
from tests.support.ray_scenario import DASHBOARD, POD, STATUS, Event, ScenarioResult, Timing

DESCRIPTION = {"head-pod": "with the gate (after the seed's change)",
               "none": "without the gate (before it)"}

LANE = {POD: "head Pod", DASHBOARD: "Dashboard", STATUS: "RayService status"}
#: The operator's status writes get a lane of their own: they are what the seed counts.
STATUS_LANE = "rayservices/status writes"


def _mark(result: ScenarioResult, event: Event) -> TimelineMark | None:
    """A scenario event the audit log does not show (writes come from the audit log itself)."""
    assert result.started_at is not None
    at = result.started_at + dt.timedelta(seconds=event.t)
    text = f"{event.text} {event.detail}".strip()
    if event.kind == POD:
        return TimelineMark(LANE[POD], at, text, "state", event.text.removeprefix("head Pod "))
    if event.kind == DASHBOARD:
        if "refused" in event.text:
            return TimelineMark(LANE[DASHBOARD], at, text, "failed")
        label = {"Dashboard answering": "answering", "Serve config submitted": "PUT"}
        return TimelineMark(LANE[DASHBOARD], at, text, "request", label.get(event.text, ""))
    if event.kind == STATUS:
        label = event.text.removeprefix("serviceStatus ")
        return TimelineMark(LANE[STATUS], at, text, "state",
                            "promoted" if label.startswith("promoted") else label)
    return None


def timeline_of(result: ScenarioResult, operator_user: str) -> TimelineInput:
    """One run as a report section: the operator's writes judged (orange: said nothing new
    but timestamps), the head Pod's phases, the Dashboard's answers and refusals, the
    RayService's status, and the three phases behind them."""
    assert result.started_at is not None
    start = result.started_at

    def at(t: float | None) -> dt.datetime | None:
        return None if t is None else start + dt.timedelta(seconds=t)

    phases = [(result.head_created_at or 0.0, result.head_ready_at, "phase-1",
               "head Pod not Ready"),
              (result.head_ready_at, result.dashboard_up_at, "phase-2",
               "head Pod Ready, Dashboard refusing"),
              (result.dashboard_up_at, result.running_at, "phase-3",
               "Dashboard answering, Serve deploying")]
    spans = [TimelineSpan(a, b, f"{label}: {t0:.1f}-{t1:.1f} s", kind)
             for t0, t1, kind, label in phases
             if t0 is not None and t1 is not None and t1 > t0
             for a, b in [(at(t0), at(t1))] if a is not None and b is not None]
    redundant = sum(1 for c in result.writes if result.verdicts.get(c.audit_id)
                    and c.subresource == "status")
    return TimelineInput(
        title=f"{DESCRIPTION[result.label.split('=', 1)[1]]}: {result.status_writes} status "
              f"writes, {redundant} of them saying nothing new",
        writes=result.writes, verdicts=result.verdicts, changes=result.changes,
        marks=[m for m in (_mark(result, e) for e in result.events) if m is not None],
        spans=spans, origin=start, lanes=(STATUS_LANE, operator_user, *LANE.values()),
        write_lane=lambda call: (STATUS_LANE if call.subresource == "status"
                                 and call.resource == "rayservices" else call.user),
        note=f"{result.label}: Running after {result.duration:.1f} s; "
             f"{result.refused_calls} Dashboard calls refused, "
             f"{result.serve_submissions} Serve config submissions.")


def write_chart(path: Path, results: list[ScenarioResult], users: list[str], timing: Timing,
                meta: dict[str, Any]) -> Path:
    scenario = (f"Each Ray Pod is Pending for {timing.head_running_after:g} s, then Running but "
                f"not Ready for {timing.head_ready_after:g} s, then Ready; the Dashboard refuses "
                f"connections until {timing.dashboard_after:g} s after the head Pod is Ready; "
                f"Serve applications report DEPLOYING/UPDATING for "
                f"{timing.serve_ready_after:g} s after submission. Writes come from the "
                "kube-apiserver audit log, from the create until serviceStatus was Running; "
                "KubeRay measured 47 status writes before the seed's change and 13 after. "
                f"Kubernetes {meta.get('kubernetes_version')}, generated {meta.get('generated')} "
                "by python -m bench.demo.")
    counts = " vs ".join(str(r.status_writes) for r in results)
    return write_report(path, [timeline_of(r, u) for r, u in zip(results, users, strict=True)],
                        title=f"RayService status writes until Running: {counts}", note=scenario)
