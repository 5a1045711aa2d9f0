"""A neutral observer of a namespace's Pods: when each became Ready, when each was deleted.

The scale bench compares two Pod simulators (ours and KWOK's); each keeps its own records,
so neither's word can be the measure. This runs as its own process (no GIL shared with our
engine, which runs in the bench's process), lists and watches the Pods as an ordinary
client, and prints one JSON line a second (wall-clock times) until its stdin closes::

    {"listed": true, "ready": 1834, "last_ready_at": 1764652800.12, "deleted": 0,
     "last_deleted_at": null}

``listed`` turns true once the first list is in: what happens after that is seen.

    python -m bench.pod_watch KUBECONFIG NAMESPACE
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from envtest import api_client_from_kubeconfig, request, watch


class Tally:
    """First-Ready and deletion times per Pod uid (the first time seen wins)."""

    def __init__(self) -> None:
        self.ready: dict[str, float] = {}
        self.deleted: dict[str, float] = {}
        self.listed = False
        self.lock = threading.Lock()

    def see(self, kind: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        now = time.time()
        with self.lock:
            if kind == "DELETED":
                self.deleted.setdefault(uid, now)
            elif uid not in self.ready and is_ready(pod):
                self.ready[uid] = now

    def line(self) -> str:
        with self.lock:
            return json.dumps({"listed": self.listed, "ready": len(self.ready),
                               "last_ready_at": max(self.ready.values(), default=None),
                               "deleted": len(self.deleted),
                               "last_deleted_at": max(self.deleted.values(), default=None)})


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def follow(kubeconfig: str, namespace: str, tally: Tally) -> None:
    """List, then watch from the list's resourceVersion; list again after a 410 Gone."""
    client = api_client_from_kubeconfig(kubeconfig)
    path = f"/api/v1/namespaces/{namespace}/pods"
    while True:
        listing = request(client, "GET", path, timeout=120)
        for pod in listing["items"]:
            tally.see("ADDED", pod)
        tally.listed = True
        version = listing["metadata"]["resourceVersion"]
        gone = False
        while not gone:
            for event in watch(client, path, query={"resourceVersion": version},
                               timeout_seconds=300):
                if event["type"] == "ERROR":
                    gone = True
                    break
                obj = event["object"]
                version = obj["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    tally.see(event["type"], obj)


def main(argv: list[str] | None = None) -> int:
    kubeconfig, namespace = (argv if argv is not None else sys.argv[1:])
    tally = Tally()
    threading.Thread(target=follow, args=(kubeconfig, namespace, tally), daemon=True).start()
    closed = threading.Event()

    def wait_for_eof() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    while not closed.wait(1.0):
        print(tally.line(), flush=True)
    print(tally.line(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
