"""A database migrator: a Python thread operator with an unobserved-state bug, and its twin.

A database is a ConfigMap labelled ``app=db`` whose ``data.version`` says the schema version
wanted; the operator runs each migration as a ConfigMap ``<db>-migration-<a>-to-<b>`` and
records the version applied in the annotation ``example.com/applied-version``.  Versions go
in order (:data:`VERSIONS`): there is a migration from each to the next, and no other.

- ``migrator(namespace)`` is edge-triggered: it migrates from the version it last *saw* to
  the one it sees now.  Every change seen, that is right; with one change unobserved (v2
  held back until v3 came, as an informer that was paused would see it) it runs
  ``v1-to-v3``, a migration that does not exist, and never runs ``v1-to-v2`` or
  ``v2-to-v3``.
- ``migrator(namespace, level=True)`` is level-triggered: it migrates step by step from the
  version applied (its annotation) to the one wanted, whatever it saw in between.

It watches the databases (a list, then a watch from its resourceVersion, as an informer
does) and writes a heartbeat ConfigMap every 0.2 s, so its writes come in another order in
every run; at each beat it stamps each database it knows with the beat (its own write of
the object between the test's two changes, which must not end an unobserved hold).
"""

from __future__ import annotations

import threading
from typing import Any

import kubernetes

VERSIONS = ("v1", "v2", "v3", "v4")
APPLIED = "example.com/applied-version"
#: The beat at which the operator last checked a database: its own write of the database
#: between the test's changes (an unobserved point must hold the view past it).
CHECKED = "example.com/checked-beat"
HEARTBEAT_SECONDS = 0.2


def _steps(old: str, new: str, level: bool) -> list[tuple[str, str]]:
    if not level:
        return [(old, new)]  # the bug: one step from what it saw, whatever came between
    first, last = VERSIONS.index(old), VERSIONS.index(new)
    return list(zip(VERSIONS[first:last], VERSIONS[first + 1:last + 1], strict=True))


def migrator(namespace: str, level: bool = False) -> Any:
    """The operator (``run_operator(migrator(namespace))``); see the module."""

    def run(api_client: kubernetes.client.ApiClient, stop: threading.Event) -> None:
        core = kubernetes.client.CoreV1Api(api_client)
        seen: dict[str, str] = {}

        def annotate(name: str, version: str) -> None:
            core.patch_namespaced_config_map(
                name, namespace, {"metadata": {"annotations": {APPLIED: version}}})

        def migrate(name: str, old: str, new: str) -> None:
            for a, b in _steps(old, new, level):
                try:
                    core.create_namespaced_config_map(namespace, {"metadata": {
                        "name": f"{name}-migration-{a}-to-{b}",
                        "labels": {"migration-of": name}}})
                except kubernetes.client.ApiException as error:
                    if error.status != 409:  # run before a restart: done
                        raise
            annotate(name, new)

        def handle(db: Any) -> None:
            name = db.metadata.name
            wanted = (db.data or {}).get("version")
            applied = (db.metadata.annotations or {}).get(APPLIED)
            if wanted not in VERSIONS:
                return
            if applied is None:  # a new database: at its first version
                annotate(name, wanted)
                seen[name] = wanted
                return
            before = applied if level else seen.get(name, applied)
            seen[name] = wanted
            if before != wanted:
                migrate(name, before, wanted)

        def heartbeat() -> None:
            beat = 0
            while not stop.wait(HEARTBEAT_SECONDS):
                beat += 1
                body = {"metadata": {"name": "migrator-heartbeat"}, "data": {"beat": str(beat)}}
                try:
                    core.replace_namespaced_config_map("migrator-heartbeat", namespace, body)
                except kubernetes.client.ApiException as error:
                    if error.status == 404:
                        try:
                            core.create_namespaced_config_map(namespace, body)
                        except kubernetes.client.ApiException:
                            pass
                except Exception:  # noqa: BLE001 - a heartbeat never stops the operator
                    pass
                for name in list(seen):  # what it reports of each database, each beat
                    try:
                        core.patch_namespaced_config_map(name, namespace, {"metadata": {
                            "annotations": {CHECKED: str(beat)}}})
                    except Exception:  # noqa: BLE001
                        pass

        threading.Thread(target=heartbeat, name="migrator-heartbeat", daemon=True).start()
        watch = kubernetes.watch.Watch()
        while not stop.is_set():
            try:
                listing = core.list_namespaced_config_map(namespace, label_selector="app=db")
                for db in listing.items:
                    handle(db)
                for event in watch.stream(core.list_namespaced_config_map, namespace,
                                          label_selector="app=db", timeout_seconds=1,
                                          resource_version=listing.metadata.resource_version):
                    if stop.is_set():
                        break
                    if event["type"] in ("ADDED", "MODIFIED"):
                        handle(event["object"])
            except kubernetes.client.ApiException:
                stop.wait(0.2)  # listed again on the next pass

    return run
