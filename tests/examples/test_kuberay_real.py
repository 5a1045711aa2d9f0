"""The seed on the real KubeRay binaries: v0.5.0 calls its Dashboard before the head Pod is
Ready and writes its RayService status more; v0.6.0 waits for the head Pod.

The operators are built from their Go modules, unchanged; their Dashboard calls reach the
scenario's fake Dashboard by the Service names they build, through the ``services``
fixture (no ``/etc/hosts``, no root).  What the scenario counts comes from the audit log
(status writes), the fixture's calls (Dashboard calls) and the changes the recorder saw.
"""

from __future__ import annotations

import pytest

from tests.support.go_modules import BuildUnavailable
from tests.support.kuberay_real import builds, run_scenario


@pytest.mark.reliability(reason="builds the real ray-operator v0.5.0 and v0.6.0 from their Go "
                         "modules (a minute warm, more on a fresh machine) and runs the "
                         "seed's scenario on both: make test-reliability (and .ci/run)")
def test_the_real_kuberay_shows_the_seeds_curve() -> None:
    try:
        built = builds(say=lambda *_: None)
    except BuildUnavailable as why:
        pytest.skip(f"the real KubeRay cannot be built here: {why}")
    rows = {row["version"]: row for row in run_scenario(built, 1, [3.0])}
    before, after = rows["v0.5.0"], rows["v0.6.0"]
    assert before["status_writes"] > after["status_writes"], rows
    assert after["status_writes"] <= 13, after
    # The gate: v0.6.0 calls no Dashboard before its head Pod is Ready; v0.5.0 does, and is
    # refused (the fake Dashboard is not up before it).
    assert after["calls_before_head_ready"] == 0, after
    assert before["calls_before_head_ready"] > 0 and before["dashboard_refused"] > 0, before
    assert {"PUT /api/serve/deployments/", "GET /api/serve/deployments/status"} <= set(
        before["paths"]), before
    assert {"PUT /api/serve/applications/", "GET /api/serve/applications/"} <= set(
        after["paths"]), after
