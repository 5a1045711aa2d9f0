"""Issue 6, test 2: the seed's measurement, status writes while a RayService comes up.

One scenario (``bench/scenario.py``, shared with the bench and the demo): the head Pod becomes
Ready after a fixed delay and the Dashboard answers a fixed time after that. Counted from the
audit log: the operator's writes to ``rayservices/status`` from creation until ``serviceStatus``
is ``Running``. KubeRay measured 47 before the seed's change and 13 after it.

Both settings run at the same time, each with its own operator (its own user) in its own
namespace, so the test takes one scenario's time; the counts are per user and namespace, and the
bench (``python -m bench.bench_status_writes``) runs them one after the other to compare.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from envtest import create_namespace, delete_namespace, namespace_name
from ray_operator.testing import ServePolicy
from tests.support.ray_scenario import ScenarioResult, Timing, run_scenario
from tests.support.ray_timeline import STATUS_LANE, timeline_of, write_chart

TIMING = Timing()
GATED_LIMIT = 13  # the seed's figure after the change
MIN_RATIO = 3.0


@pytest.fixture
def serve_policy() -> ServePolicy:
    return TIMING.serve_policy()


@pytest.fixture
def second_namespace(k8s) -> Iterator[str]:
    """A namespace of its own for the run without the gate (requested before ``ray_operator``,
    so the operator watching it stops before it is deleted)."""
    name = namespace_name("status-writes-no-gate")
    create_namespace(k8s.api_client, name)
    yield name
    delete_namespace(k8s.api_client, name)


def describe(result: ScenarioResult) -> str:
    lines = [f"{result.label}: {result.status_writes} status writes "
             f"({result.noise_only_status_writes} said nothing new) in {result.duration:.1f} s "
             f"(head Ready at {result.head_ready_at} s, Dashboard up at "
             f"{result.dashboard_up_at} s, Running at {result.running_at} s)"]
    lines += [f"  {e.t:7.2f}s  {e.kind:<12} {e.text} {e.detail}" for e in result.events]
    return "\n".join(lines)


def writes_before(result: ScenarioResult, t: float) -> int:
    return sum(1 for w in result.status_write_times if w < t)


def test_status_writes_with_and_without_the_gate(request, second_namespace, ray_operator,
                                                 dashboards, k8s, namespace, api_calls,
                                                 tmp_path):
    gated_operator = ray_operator(name="ray-operator-gate")
    legacy_operator = ray_operator(name="ray-operator-none", serve_gate="none",
                                   namespace=second_namespace)
    runs = [(namespace, gated_operator, "serve_gate=head-pod"),
            (second_namespace, legacy_operator, "serve_gate=none")]
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="scenario") as pool:
        futures = [pool.submit(run_scenario, k8s.api_client, ns, audit=api_calls.log,
                               operator_user=operator.user, fleet=dashboards, label=label,
                               timing=TIMING)
                   for ns, operator, label in runs]
        gated, legacy = (f.result() for f in futures)

    ratio = legacy.status_writes / max(gated.status_writes, 1)
    figures = (f"rayservices/status writes from creation until Running: with the gate "
               f"{gated.status_writes}, without it {legacy.status_writes} ({ratio:.1f}x; "
               f"KubeRay: 13 and 47)")
    print(f"\n{figures}")
    request.node.add_report_section("call", "status writes",
                                    "\n\n".join([figures, describe(gated), describe(legacy)]))

    assert gated.head_ready_at is not None and legacy.head_ready_at is not None
    # With the gate, the only write before the head Pod is Ready persists the pending cluster's
    # name; without it, every failed Dashboard call is written.
    assert writes_before(gated, gated.head_ready_at) == 1, describe(gated)
    assert writes_before(legacy, legacy.head_ready_at) > 1, describe(legacy)
    # No Dashboard call at all before the head Pod was Ready (refused calls are seen in the
    # operator's log: a refused connection never reaches the fake Dashboard).
    assert all(t >= gated.head_ready_at for t in gated.refused_call_times), describe(gated)
    assert any(t < legacy.head_ready_at for t in legacy.refused_call_times), describe(legacy)
    # Once (and once more per fresh instance, where exploration's crash fault started one:
    # KubeRay remembers what it submitted in memory).
    assert 1 <= gated.serve_submissions <= 1 + gated_operator.restarts, describe(gated)
    assert 1 <= gated.status_writes <= GATED_LIMIT, describe(gated)
    assert legacy.status_writes >= MIN_RATIO * gated.status_writes, figures
    # The seed's complaint itself: writes that said nothing new (only timestamps, or nothing
    # kube-apiserver stored). Without the gate about half of them; with it none.
    assert gated.noise_only_status_writes == 0, describe(gated)
    assert legacy.noise_only_status_writes >= 4, describe(legacy)
    assert legacy.redundant_status_writes <= legacy.noise_only_status_writes

    # make demo's chart is the framework's timeline report: one section per run, the status
    # writes on a lane of their own, the ones that said nothing new marked redundant.
    users = [gated_operator.user, legacy_operator.user]
    for result, user in zip((gated, legacy), users, strict=True):
        section = timeline_of(result, user)
        assert section.write_lane is not None
        status = [c for c in section.writes if section.write_lane(c) == STATUS_LANE]
        assert len(status) == result.status_writes, describe(result)
        assert sum(1 for c in status if section.verdicts.get(c.audit_id)) \
            == result.noise_only_status_writes, describe(result)
    chart = write_chart(tmp_path / "demo.html", [gated, legacy], users, TIMING,
                        {"kubernetes_version": "test", "generated": "now"}).read_text()
    assert chart.count('<section class="timeline"') == 2
    assert chart.count(f'<g class="lane" data-lane="{STATUS_LANE}"') == 2
    assert f"{legacy.status_writes} status writes, {legacy.noise_only_status_writes} of them" \
        in chart
