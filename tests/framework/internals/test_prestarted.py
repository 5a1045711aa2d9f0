"""White-box: the pool of planes started ahead shrinks to what the machine's memory holds."""

from __future__ import annotations

import psutil

from envtest.clusters.prestarted import planes_that_fit


def test_a_pool_that_does_not_fit_in_memory_is_made_smaller() -> None:
    total_mib = psutil.virtual_memory().available / 2**20
    fits, warning = planes_that_fit(10_000, plane_mib=330)
    assert fits < 10_000 and fits == int(total_mib * 0.5 // 330)
    assert warning and "reduced from 10000" in warning and "MiB available" in warning
    assert planes_that_fit(1, plane_mib=1) == (1, None)
