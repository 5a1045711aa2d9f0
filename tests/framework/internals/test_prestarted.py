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


def test_a_start_ahead_that_failed_is_told_not_dropped(tmp_path) -> None:
    """A plane started ahead whose start failed in the background was dropped without a
    word; the pool now keeps why, for the session's summary."""
    from envtest import ClusterOptions, eventually
    from envtest.clusters.prestarted import PrestartedPool

    for name in ("etcd", "kube-apiserver"):  # binaries that fail at once
        binary = tmp_path / name
        binary.write_text("#!/bin/sh\necho 'not really' >&2\nexit 3\n")
        binary.chmod(0o755)
    options = ClusterOptions(bin_dir=tmp_path, installed_only=True, start_timeout=20)
    pool = PrestartedPool(1)
    try:
        pool.want("broken", options)
        eventually(lambda: pool.failed_starts, timeout=60)
    finally:
        pool.close()
    assert len(pool.failed_starts) == 1, pool.failed_starts
    assert pool.failed_starts[0].startswith("ProcessExitedError: etcd exited with code 3"), \
        pool.failed_starts
