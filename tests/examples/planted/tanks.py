"""A tank keeper (a Python thread, polling every namespace), with a bug of each kind operation
exploration finds, and their fixed twin (no bug named).

A Tank (``crd.yaml``) has ``spec.size`` parts, each a ConfigMap ``<tank>-part-<i>``, and a
ConfigMap ``<tank>-config`` holding its ``image`` and ``mode``.  The keeper polls the Tanks
of every namespace every 0.1 s and makes each tank's objects what its spec says.  The bugs,
each a mistake real operators make (Acto's list has each kind):

- ``stale-image`` (consistency): the config is written when it is made, never updated: a
  changed ``image`` never reaches it (the operator reads the field only on create);
- ``zero-size`` (a boundary value): a part's name ends in its index, and with ``size: 0``
  the keeper still makes "the last part", its index left out (``t-part-``): a name the
  apiserver refuses, on every pass: an error loop;
- ``leaky-shrink`` (differential): a smaller size makes no new part but deletes none either:
  a tank shrunk by a change keeps parts a tank made at that size never had.

``pace`` (no bug: a keeper that paces its work, as cass-operator does between a node's
start and the next step, and in its "quiet period" after a status write) makes
``<tank>-ready`` only once the tank is ``pace`` seconds old, and updates a config only
``pace`` seconds after the spec changed: longer than a trial's quiet spell, so a tank made
by changes, older, has its ready record when one made directly, quiet meanwhile, has not
yet, and a changed image reaches the config after the change looked settled.

``resync`` (no bug) sends each tank's config back as read on every pass: an update that
stores nothing, as controllers do that update what they own on every reconcile (ZooKeeper's
operator sends its three Services again on each retry of a reconcile that fails further on).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import kubernetes

POLL_SECONDS = 0.1
GROUP, VERSION, PLURAL = "planted.example.com", "v1", "tanks"
BUGS = ("stale-image", "zero-size", "leaky-shrink")


def keeper(bug: str = "", pace: float = 0.0, resync: bool = False) -> Any:
    """The operator (``run_operator(keeper("stale-image"))``; no bug: the fixed twin;
    ``pace``: seconds before a tank's ready record is made; ``resync``: each pass sends the
    configs back unchanged)."""
    if bug and bug not in BUGS:
        raise ValueError(f"no such bug {bug!r}: {', '.join(BUGS)}")

    def run(api_client: kubernetes.client.ApiClient, stop: threading.Event) -> None:
        seen: dict[tuple[str, str, int], float] = {}  # a tank's generation: first seen at
        core = kubernetes.client.CoreV1Api(api_client)
        custom = kubernetes.client.CustomObjectsApi(api_client)
        while not stop.wait(POLL_SECONDS):
            for tank in custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]:
                try:
                    metadata = tank["metadata"]
                    first = seen.setdefault((metadata["namespace"], metadata["name"],
                                             int(metadata.get("generation", 1))),
                                            time.monotonic())
                    reconcile(core, tank, bug, pace, time.monotonic() - first, resync)
                except kubernetes.client.ApiException as error:  # retried on the next pass
                    print(f"tank {tank['metadata']['name']}: {error.status} {error.reason}")

    return run


def _owner(tank: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Tank", "controller": True,
            "name": tank["metadata"]["name"], "uid": tank["metadata"]["uid"]}


def _age(tank: dict[str, Any]) -> float:
    made = tank["metadata"]["creationTimestamp"].replace("Z", "+00:00")
    return (dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(made)).total_seconds()


def reconcile(core: Any, tank: dict[str, Any], bug: str, pace: float = 0.0,
              since_change: float = 0.0, resync: bool = False) -> None:
    name, namespace = tank["metadata"]["name"], tank["metadata"]["namespace"]
    spec = tank["spec"]
    size = int(spec["size"])
    have = {m.metadata.name for m in core.list_namespaced_config_map(
        namespace, label_selector=f"tank={name}").items}
    config = {"metadata": {"name": f"{name}-config", "labels": {"tank": name, "role": "config"},
                           "ownerReferences": [_owner(tank)]},
              "data": {"image": spec.get("image", ""), "mode": spec.get("mode", "")}}
    if config["metadata"]["name"] not in have:
        core.create_namespaced_config_map(namespace, config)
    elif bug != "stale-image" and since_change >= pace:
        current = core.read_namespaced_config_map(config["metadata"]["name"], namespace)
        if current.data != config["data"]:
            core.patch_namespaced_config_map(config["metadata"]["name"], namespace,
                                             {"data": config["data"]})
        elif resync:  # sent back as read: stores nothing
            core.replace_namespaced_config_map(config["metadata"]["name"], namespace,
                                               current)
    wanted = [f"{name}-part-{i}" for i in range(size)]
    if bug == "zero-size" and size == 0:
        wanted = [f"{name}-part-"]  # "the last part" of none: a name the apiserver refuses
    for part in wanted:
        if part not in have:
            core.create_namespaced_config_map(namespace, {"metadata": {
                "name": part, "labels": {"tank": name, "role": "part"},
                "ownerReferences": [_owner(tank)]}})
    if bug != "leaky-shrink":
        for part in sorted(have):
            if part.startswith(f"{name}-part-") and part not in wanted:
                core.delete_namespaced_config_map(part, namespace)
    if pace and f"{name}-ready" not in have and _age(tank) >= pace:
        core.create_namespaced_config_map(namespace, {"metadata": {
            "name": f"{name}-ready", "labels": {"tank": name, "role": "ready"},
            "ownerReferences": [_owner(tank)]}})
