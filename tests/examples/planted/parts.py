"""A parts keeper that reads by watch or by polling, edge-triggered (the bug) or level-triggered.

A machine is a ConfigMap labelled ``app=machine`` whose ``data.size`` says how many parts it
has; each part is a ConfigMap ``<machine>-part-<i>`` (``i`` from 0).  The keeper makes the
parts a machine grows and, when its size drops, deletes what it shrank by:

- ``edge``: per change it sees of the machine with fewer parts wanted than it has, it
  deletes one part, the last: "the size went down, so one part goes".  Seeing every step,
  that is right (3 -> 2 -> 1: two changes, two deletes); with one change unobserved (2 held
  back until 1 came, as a paused informer would see it) it deletes one part for a drop of
  two, and a part is left over for good;
- ``level``: deletes parts until there are as many as the size, whatever it saw.

``reader="watch"`` lists the machines, then watches from that version (as an informer
does), and acts on each event it is sent; ``reader="poll"`` lists them every 0.1 s and acts
on each size it had not seen.  A watch that was sent one version twice (a view released by
sending the apiserver's event after the catch-up of the same version) would make the edge
keeper delete twice and level out: exploration must send each version once.
"""

from __future__ import annotations

import threading
from typing import Any

import kubernetes

POLL_SECONDS = 0.1


def part_names(name: str, size: int) -> list[str]:
    return [f"{name}-part-{i}" for i in range(size)]


def keeper(namespace: str, reader: str = "watch", level: bool = False) -> Any:
    """The operator (``run_operator(keeper(namespace, "poll"))``); see the module."""

    def run(api_client: kubernetes.client.ApiClient, stop: threading.Event) -> None:
        core = kubernetes.client.CoreV1Api(api_client)
        seen: dict[str, int] = {}

        def parts_of(name: str) -> list[str]:
            return sorted((m.metadata.name for m in core.list_namespaced_config_map(
                namespace, label_selector=f"part-of={name}").items),
                key=lambda n: int(n.rsplit("-", 1)[1]))

        def handle(machine: Any) -> None:
            """One change seen: an event (watch), or a size not seen before (poll)."""
            name = machine.metadata.name
            size = int((machine.data or {}).get("size", "0"))
            before = seen.get(name)
            if reader == "poll" and before == size:
                return  # the same size polled again: no change seen
            seen[name] = size
            have = parts_of(name)
            for part in part_names(name, size):
                if part not in have:
                    try:
                        core.create_namespaced_config_map(namespace, {"metadata": {
                            "name": part, "labels": {"part-of": name}}})
                    except kubernetes.client.ApiException as error:
                        if error.status != 409:
                            raise
            if len(have) <= size:
                return
            extra = have[size:] if level else have[-1:]  # the bug: one part per change seen
            for part in extra:
                try:
                    core.delete_namespaced_config_map(part, namespace)
                except kubernetes.client.ApiException as error:
                    if error.status != 404:
                        raise

        if reader == "poll":
            while not stop.wait(POLL_SECONDS):
                for machine in core.list_namespaced_config_map(
                        namespace, label_selector="app=machine").items:
                    handle(machine)
            return
        listing = core.list_namespaced_config_map(namespace, label_selector="app=machine")
        for machine in listing.items:
            handle(machine)
        version = listing.metadata.resource_version
        watch = kubernetes.watch.Watch()
        while not stop.is_set():
            for event in watch.stream(core.list_namespaced_config_map, namespace,
                                      label_selector="app=machine", resource_version=version,
                                      timeout_seconds=1):
                version = event["object"].metadata.resource_version
                if event["type"] in ("ADDED", "MODIFIED"):
                    handle(event["object"])
                if stop.is_set():
                    watch.stop()
                    break

    return run
