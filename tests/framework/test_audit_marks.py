"""Where a test's API calls begin: a mark costs a ``stat``, no request, and stays exact.

A mark used to sync (a SelfSubjectReview, then a wait until its audit event was read), and
every test took one: 10 ms per test, 10 s when the audit log could not be written.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from envtest import AuditLog, Clients, Cluster


def _sync_requests(cluster: Cluster) -> int:
    """How many sync markers (SelfSubjectReviews) the audit log has (their complete lines: a
    write has a received line too)."""
    with open(cluster.log_paths["audit"]) as log:
        return sum("/selfsubjectreviews" in line and '"stage":"ResponseComplete"' in line
                   for line in log)


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


def _event(audit_id: str, stage: str, at: str, name: str = "") -> str:
    event = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
             "auditID": audit_id, "stage": stage, "verb": "create",
             "requestURI": "/api/v1/namespaces/ns/configmaps",
             "user": {"username": "op"}, "userAgent": "op/1",
             "objectRef": {"resource": "configmaps", "namespace": "ns", "name": name},
             "requestReceivedTimestamp": f"2026-12-03T10:00:{at}Z",
             "stageTimestamp": f"2026-12-03T10:00:{at}Z"}
    if stage == "ResponseComplete":
        event["responseStatus"] = {"code": 201}
    return json.dumps(event) + "\n"


def test_a_write_still_answering_when_the_test_counts_is_counted(tmp_path: Path) -> None:
    """The race exploration found: a write's change is visible (committed, its watch event
    delivered) while it still sends its answer, so its audit line comes after the sync's
    marker; a count right then missed it.  Its received line now makes the sync wait."""
    path = tmp_path / "audit.log"
    path.write_text(_event("w", "RequestReceived", "01.000", "late"))

    def marker() -> str:  # the marker completes first; the write's line follows 0.2 s later
        with path.open("a") as log:
            log.write(_event("m", "RequestReceived", "01.100"))
            log.write(_event("m", "ResponseComplete", "01.101"))

        def finish() -> None:
            time.sleep(0.2)  # the write still sending its answer
            with path.open("a") as log:
                log.write(_event("w", "ResponseComplete", "01.300", "late"))

        threading.Thread(target=finish, daemon=True).start()
        return "m"

    log = AuditLog(path, marker)
    assert [(c.name, c.code) for c in log.calls(resource="configmaps")] == [("late", 201)]
    assert [c.audit_id for c in log.calls()] == ["w"], "the marker is never reported"
