"""The same small suite passes with ``-n 2`` (one control plane per worker) and with ``-n 0``."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

INNER = textwrap.dedent("""
    import json
    import os
    from pathlib import Path

    import pytest

    RECORDS = Path(__file__).parent / "records"


    @pytest.mark.parametrize("index", range(4))
    def test_isolated_work(index, request, envtest, namespace, apply, pods, api_calls, k8s):
        apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "x"}]}})
        pods.set_running("p")
        # Per worker, per test: no other test's calls leak into these counts.
        assert api_calls.count(resource="pods", subresource="status") == 1
        assert [p.metadata.name for p in k8s.core.list_namespaced_pod(namespace).items] == ["p"]
        workerinput = getattr(request.config, "workerinput", {})
        RECORDS.mkdir(exist_ok=True)
        (RECORDS / f"{index}.json").write_text(json.dumps({
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "none"),
            "server": envtest.server,
            "pids": sorted(envtest.pids.values()),
            "binaries_from_controller": "envtest_binaries" in workerinput,
        }))
""")


def records(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((directory / "records").glob("*.json"))]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_two_workers_each_use_their_own_control_plane(own_plane_pytester: pytest.Pytester) -> None:
    own_plane_pytester.makepyfile(test_inner=INNER)
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2",
                                                 timeout=180)
    result.assert_outcomes(passed=4)
    seen = records(own_plane_pytester.path)
    assert len(seen) == 4
    servers = {r["worker"]: set() for r in seen}
    for record in seen:
        servers[record["worker"]].add(record["server"])
    assert set(servers) == {"gw0", "gw1"}
    assert all(len(s) == 1 for s in servers.values())  # one control plane per worker...
    assert len({r["server"] for r in seen}) == 2  # ...and not shared between them
    assert all(r["binaries_from_controller"] for r in seen)  # resolved once, handed down
    assert not any(alive(pid) for r in seen for pid in r["pids"])  # stopped at the end


def test_the_same_suite_passes_without_xdist(inner_pytester: pytest.Pytester) -> None:
    inner_pytester.makepyfile(test_inner=INNER)
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0",
                                                 timeout=180)
    result.assert_outcomes(passed=4)
    seen = records(inner_pytester.path)
    assert len(seen) == 4
    assert {r["worker"] for r in seen} == {"none"}
    assert len({r["server"] for r in seen}) == 1  # one control plane, reused by every test
    assert not any(alive(pid) for r in seen for pid in r["pids"])
