"""Where a test's API calls begin: a mark costs a ``stat``, no request, and stays exact.

A mark used to sync (a SelfSubjectReview, then a wait until its audit event was read), and
every test took one: 10 ms per test, 10 s when the audit log could not be written.
"""

from __future__ import annotations

from typing import Any

from envtest import Clients, Cluster


def _sync_requests(cluster: Cluster) -> int:
    """How many of the audit log's lines are sync markers (SelfSubjectReviews)."""
    with open(cluster.log_paths["audit"]) as log:
        return sum("/selfsubjectreviews" in line for line in log)


def test_a_mark_sends_no_request(envtest: Cluster) -> None:
    log = envtest.audit_log
    log.sync()
    before = _sync_requests(envtest)
    for _ in range(20):
        log.mark()
    log.sync()  # one marker: the reading, not the marks
    assert _sync_requests(envtest) == before + 1


def config_map(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def test_marks_taken_right_after_a_call_split_the_calls_exactly(envtest: Cluster, k8s: Clients,
                                                                 namespace: str) -> None:
    # No sync between a write and the next mark: the write's audit line may still be in
    # flight when the mark is taken; it must count before the mark all the same.
    log = envtest.audit_log
    marks = []
    for index in range(40):
        k8s.core.create_namespaced_config_map(namespace, config_map(f"c{index}"))
        marks.append(log.mark())

    def created(**window: Any) -> list[str]:
        return [c.name for c in log.calls(verb="create", resource="configmaps",
                                          namespace=namespace, **window)]

    for index in range(39):
        assert created(since=marks[index], until=marks[index + 1]) == [f"c{index + 1}"]
    assert created(since=marks[-1]) == []
    assert created(until=marks[0]) == ["c0"]
