"""The worker loop's error handling, with a reconcile function standing in (no API involved).

What was retried, when and why is asserted on ``Controller.retries``; the log is asserted only
where logging is the behaviour (key on every line, traceback for errors, one line for conflicts).
"""

import logging
import threading

import pytest

from ray_operator.runtime import Conflict, Controller, History, Result, Retry


class FunctionReconciler:
    """A ``Reconciler`` around a plain function."""

    name = "test"

    def __init__(self, reconcile):
        self.reconcile = reconcile

    def register(self, enqueue):
        pass


def controller_for(reconcile, workers=1):
    return Controller(
        FunctionReconciler(reconcile),
        workers=workers,
        backoff_base_seconds=0.01,
        backoff_max_seconds=1,
    )


def run_until(controller: Controller, done: threading.Event) -> None:
    threads = controller.start()
    assert done.wait(5)
    controller.stop()
    for t in threads:
        t.join(2)


def failing_twice(calls, done):
    def reconcile(key, log):
        calls.append(key)
        if len(calls) < 3:
            raise RuntimeError("boom")
        done.set()
        return None

    return reconcile


def test_exception_is_retried_with_backoff_and_recorded():
    calls = []
    done = threading.Event()
    controller = controller_for(failing_twice(calls, done))
    controller.enqueue("ns/obj")
    run_until(controller, done)
    assert calls == ["ns/obj"] * 3
    retries = controller.retries.snapshot()
    assert [(r.key, r.reason, r.delay_seconds) for r in retries] == [
        ("ns/obj", "error", 0.01),
        ("ns/obj", "error", 0.02),
    ]
    assert all(r.message == "RuntimeError: boom" for r in retries)
    assert retries[0].monotonic <= retries[1].monotonic
    assert controller.retries.total == 2
    assert controller.queue.backoff.failures("ns/obj") == 0  # success forgets


def test_exception_is_logged_with_key_and_traceback(caplog):
    calls = []
    done = threading.Event()
    controller = controller_for(failing_twice(calls, done))
    controller.enqueue("ns/obj")
    with caplog.at_level(logging.INFO, logger="ray_operator"):
        run_until(controller, done)
    failures = [r for r in caplog.records if r.exc_info is not None]
    assert len(failures) == len(controller.retries) == 2
    assert failures[0].key == "ns/obj" and failures[0].controller == "test"
    assert "key=ns/obj" in failures[0].getMessage()
    assert failures[0].name == "ray_operator.controllers.test"


def test_conflict_is_recorded_logged_on_one_line_and_retried(caplog):
    calls = []
    done = threading.Event()

    def reconcile(key, log):
        calls.append(key)
        if len(calls) == 1:
            raise Conflict(409, "Conflict", "the object has been modified")
        done.set()

    controller = controller_for(reconcile)
    controller.enqueue("ns/obj")
    with caplog.at_level(logging.INFO, logger="ray_operator"):
        run_until(controller, done)
    assert len(calls) == 2
    [retry] = controller.retries
    assert retry == Retry(
        "ns/obj", 0.01, "conflict", "the object has been modified", retry.monotonic
    )
    lines = [r for r in caplog.records if r.name == "ray_operator.controllers.test"]
    assert len(lines) == 1 and lines[0].exc_info is None
    assert lines[0].key == "ns/obj"


def test_requeue_after_is_not_a_retry():
    times = []
    done = threading.Event()

    def reconcile(key, log):
        times.append(key)
        if len(times) == 2:
            done.set()
            return None
        return Result(requeue_after=0.05)

    controller = controller_for(reconcile, workers=2)
    controller.enqueue("ns/obj")
    run_until(controller, done)
    assert times == ["ns/obj", "ns/obj"]
    assert controller.retries.total == 0


def test_controller_is_named_after_its_reconciler():
    controller = controller_for(lambda key, log: None)
    assert controller.name == "test"
    assert isinstance(controller.reconciler, FunctionReconciler)


def test_history_keeps_the_newest_and_counts_all():
    history: History[int] = History(limit=3)
    for i in range(5):
        history.append(i)
    assert history.snapshot() == [2, 3, 4]
    assert list(history) == [2, 3, 4]
    assert len(history) == 3
    assert history.total == 5
    with pytest.raises(ValueError):
        History(limit=0)


def test_history_takes_appends_from_many_threads():
    history: History[int] = History(limit=10)

    def append_many():
        for i in range(1000):
            history.append(i)

    threads = [threading.Thread(target=append_many) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert history.total == 8000
    assert len(history) == 10
