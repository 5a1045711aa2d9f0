"""The worker loop's error handling, with a reconcile function standing in (no API involved)."""

import logging
import threading

from ray_operator.runtime import Conflict, Controller, Result


def run_until(controller: Controller, done: threading.Event) -> None:
    threads = controller.start()
    assert done.wait(5)
    controller.stop()
    for t in threads:
        t.join(2)


def test_exception_is_logged_with_key_and_traceback_then_retried_with_backoff(caplog):
    calls = []
    done = threading.Event()

    def reconcile(key, log):
        calls.append(key)
        if len(calls) < 3:
            raise RuntimeError("boom")
        done.set()
        return None

    controller = Controller(
        "test", reconcile, workers=1, backoff_base_seconds=0.01, backoff_max_seconds=1
    )
    controller.enqueue("ns/obj")
    with caplog.at_level(logging.INFO, logger="ray_operator"):
        run_until(controller, done)
    assert calls == ["ns/obj"] * 3
    failures = [r for r in caplog.records if "reconcile failed" in r.getMessage()]
    assert len(failures) == 2
    assert failures[0].key == "ns/obj" and failures[0].controller == "test"
    assert "key=ns/obj" in failures[0].getMessage()
    assert failures[0].exc_info is not None
    assert "retrying in 0.01s" in failures[0].getMessage()
    assert "retrying in 0.02s" in failures[1].getMessage()
    assert controller.queue.backoff.failures("ns/obj") == 0  # success forgets


def test_conflict_is_one_line_and_retried(caplog):
    calls = []
    done = threading.Event()

    def reconcile(key, log):
        calls.append(key)
        if len(calls) == 1:
            raise Conflict(409, "Conflict", "the object has been modified")
        done.set()

    controller = Controller(
        "test", reconcile, workers=1, backoff_base_seconds=0.01, backoff_max_seconds=1
    )
    controller.enqueue("ns/obj")
    with caplog.at_level(logging.INFO, logger="ray_operator"):
        run_until(controller, done)
    conflict = [r for r in caplog.records if "conflict" in r.getMessage()]
    assert len(conflict) == 1 and conflict[0].exc_info is None
    assert len(calls) == 2


def test_requeue_after():
    times = []
    done = threading.Event()

    def reconcile(key, log):
        times.append(key)
        if len(times) == 2:
            done.set()
            return None
        return Result(requeue_after=0.05)

    controller = Controller(
        "test", reconcile, workers=2, backoff_base_seconds=0.01, backoff_max_seconds=1
    )
    controller.enqueue("ns/obj")
    run_until(controller, done)
    assert times == ["ns/obj", "ns/obj"]
