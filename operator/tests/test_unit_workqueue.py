import threading
import time

import pytest

from ray_operator.runtime.workqueue import ExponentialBackoff, WorkQueue


def queue() -> WorkQueue:
    return WorkQueue(ExponentialBackoff(0.01, 1.0))


def test_adds_coalesce():
    q = queue()
    for _ in range(5):
        q.add("ns/a")
    q.add("ns/b")
    assert len(q) == 2
    assert q.get() == "ns/a"
    assert q.get() == "ns/b"


def test_key_added_while_processing_is_requeued_after_done_not_before():
    q = queue()
    q.add("ns/a")
    key = q.get()
    q.add("ns/a")
    q.add("ns/a")
    assert len(q) == 0  # not handed out while a worker holds it
    q.done(key)
    assert len(q) == 1
    assert q.get() == "ns/a"


def test_never_processes_one_key_concurrently():
    q = queue()
    active: set[str] = set()
    overlaps = []
    processed = []
    lock = threading.Lock()

    def worker():
        while (key := q.get()) is not None:
            with lock:
                if key in active:
                    overlaps.append(key)
                active.add(key)
            time.sleep(0.001)  # hold the key long enough for other adds to race in
            with lock:
                active.discard(key)
                processed.append(key)
            q.done(key)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(300):
        q.add(f"ns/k{i % 3}")
    deadline = time.monotonic() + 5
    while len(q) and time.monotonic() < deadline:
        time.sleep(0.01)
    q.shutdown()
    for t in threads:
        t.join(5)
    assert overlaps == []
    assert set(processed) == {"ns/k0", "ns/k1", "ns/k2"}


def test_add_after_fires_later_and_keeps_the_earliest():
    q = queue()
    start = time.monotonic()
    q.add_after("ns/a", 0.3)
    q.add_after("ns/a", 0.1)  # earlier wins
    q.add_after("ns/a", 0.5)  # later is ignored
    assert q.get() == "ns/a"
    elapsed = time.monotonic() - start
    assert 0.09 <= elapsed < 0.3
    q.done("ns/a")
    assert len(q) == 0


def test_backoff_grows_per_key_and_forget_resets():
    backoff = ExponentialBackoff(0.01, 0.05)
    assert [backoff.next_delay("a") for _ in range(5)] == pytest.approx(
        [0.01, 0.02, 0.04, 0.05, 0.05]
    )
    assert backoff.next_delay("b") == pytest.approx(0.01)
    backoff.forget("a")
    assert backoff.next_delay("a") == pytest.approx(0.01)


def test_rate_limited_add_uses_the_backoff():
    q = queue()
    assert q.add_rate_limited("ns/a") == pytest.approx(0.01)
    assert q.add_rate_limited("ns/a") == pytest.approx(0.02)
    assert q.get() == "ns/a"


def test_shutdown_unblocks_get():
    q = queue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    q.shutdown()
    t.join(2)
    assert not t.is_alive()
    assert got == [None]
