"""A cache operator written with lightkube's AsyncClient, the way a new user writes one.

Each ``Cache`` (``cache.example.com/v1``) gets, owned by it: a Deployment of memcached
(``spec.size`` replicas), a headless Service, and a ConfigMap ``<name>-config`` with its
settings; and, in the operator's own namespace ``cache-records``, a record ConfigMap named
``<namespace of the Cache>.<name>`` (an owner reference cannot cross namespaces, so a
finalizer deletes it when the Cache goes).  The Cache's status says how many replicas are
ready, with ``Ready`` and ``Progressing`` conditions.

It watches Caches and Deployments in every namespace (or in one: ``--namespace``, default
``$WATCH_NAMESPACE``) and reconciles one Cache at a time from a queue; a failed reconcile is
tried again a second later.  Run as a command:

    python cache_operator.py --kubeconfig PATH [--namespace NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.apps_v1 import DeploymentSpec
from lightkube.models.core_v1 import (
    Container,
    ContainerPort,
    PodSpec,
    PodTemplateSpec,
    ServicePort,
    ServiceSpec,
)
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta, OwnerReference
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace, Service
from lightkube.types import PatchType

log = logging.getLogger("cache-operator")
Cache = create_namespaced_resource("cache.example.com", "v1", "Cache", "caches")
RECORDS = os.environ.get("CACHE_RECORDS_NAMESPACE", "cache-records")
FINALIZER = "cache.example.com/record"
MANAGER = "cache-operator"
RETRY_SECONDS = 1.0


def record_name(namespace: str, name: str) -> str:
    return f"{namespace}.{name}"


def _owner(cache: Any) -> OwnerReference:
    return OwnerReference(apiVersion="cache.example.com/v1", kind="Cache",
                          name=cache.metadata.name, uid=cache.metadata.uid, controller=True,
                          blockOwnerDeletion=True)


def children(cache: Any) -> list[Any]:
    """What a Cache owns, as the operator applies it."""
    meta = cache.metadata
    spec = cache.spec or {}
    labels = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": meta.name}
    owned = ObjectMeta(name=meta.name, namespace=meta.namespace, labels=labels,
                       ownerReferences=[_owner(cache)])
    image = spec.get("image", "memcached:1.6")
    deployment = Deployment(metadata=owned, spec=DeploymentSpec(
        replicas=int(spec["size"]), selector=LabelSelector(matchLabels=labels),
        template=PodTemplateSpec(metadata=ObjectMeta(labels=labels), spec=PodSpec(
            containers=[Container(name="memcached", image=image,
                                  ports=[ContainerPort(containerPort=11211,
                                                       name="memcached")])]))))
    service = Service(metadata=owned, spec=ServiceSpec(
        clusterIP="None", selector=labels,
        ports=[ServicePort(name="memcached", port=11211)]))
    config = ConfigMap(metadata=ObjectMeta(name=f"{meta.name}-config",
                                           namespace=meta.namespace, labels=labels,
                                           ownerReferences=[_owner(cache)]),
                       data={"ttl": str(spec.get("ttl", "60s")), "size": str(spec["size"])})
    return [deployment, service, config]


def record(cache: Any) -> ConfigMap:
    meta = cache.metadata
    return ConfigMap(metadata=ObjectMeta(
        name=record_name(meta.namespace, meta.name), namespace=RECORDS,
        labels={"cache.example.com/namespace": meta.namespace}),
        data={"namespace": meta.namespace, "cache": meta.name,
              "size": str((cache.spec or {})["size"])})


async def reconcile(client: AsyncClient, namespace: str, name: str) -> None:
    try:
        cache = await client.get(Cache, name, namespace=namespace)
    except ApiError as error:
        if error.status.code == 404:
            return  # gone: its children go with it (owner references), its record went first
        raise
    meta = cache.metadata
    finalizers = list(meta.finalizers or [])
    if meta.deletionTimestamp:
        if FINALIZER in finalizers:
            try:
                await client.delete(ConfigMap, record_name(namespace, name), namespace=RECORDS)
            except ApiError as error:
                if error.status.code != 404:
                    raise
            finalizers.remove(FINALIZER)
            await client.patch(Cache, name, {"metadata": {
                "finalizers": finalizers, "resourceVersion": meta.resourceVersion}},
                namespace=namespace, patch_type=PatchType.MERGE)
        return
    if FINALIZER not in finalizers:
        await client.patch(Cache, name, {"metadata": {
            "finalizers": [*finalizers, FINALIZER], "resourceVersion": meta.resourceVersion}},
            namespace=namespace, patch_type=PatchType.MERGE)
    for child in children(cache):
        await client.apply(child, field_manager=MANAGER, force=True)
    await client.apply(record(cache), field_manager=MANAGER, force=True)
    deployment = await client.get(Deployment, name, namespace=namespace)
    ready = (deployment.status.readyReplicas or 0) if deployment.status else 0
    size = int(cache.spec["size"])
    done = ready == size
    status = {
        "readyReplicas": ready, "observedGeneration": meta.generation,
        "conditions": [
            {"type": "Ready", "status": "True" if done else "False",
             "reason": "ReplicasReady" if done else "ReplicasNotReady",
             "message": f"{ready} of {size} replicas ready"},
            {"type": "Progressing", "status": "False" if done else "True",
             "reason": "Settled" if done else "Scaling"},
        ]}
    if (cache.status or {}) != status:
        await client.patch(Cache.Status, name, {"status": status}, namespace=namespace,
                           patch_type=PatchType.MERGE)


async def watch(client: AsyncClient, resource: Any, queue: asyncio.Queue[tuple[str, str]],
                owner_kind: str | None = None, namespace: str = "*") -> None:
    """Queue the Cache behind every event of ``resource`` (a Deployment: its owner)."""
    while True:
        try:
            async for _, obj in client.watch(resource, namespace=namespace):
                meta = obj.metadata
                if owner_kind is None:
                    queue.put_nowait((meta.namespace, meta.name))
                    continue
                for owner in meta.ownerReferences or []:
                    if owner.kind == owner_kind:
                        queue.put_nowait((meta.namespace, owner.name))
        except Exception as error:  # a watch that ends or fails is opened again
            log.warning("watch of %s ended: %s", resource.__name__, error)
            await asyncio.sleep(RETRY_SECONDS)


async def work(client: AsyncClient, queue: asyncio.Queue[tuple[str, str]]) -> None:
    while True:
        namespace, name = await queue.get()
        try:
            await reconcile(client, namespace, name)
        except Exception as error:
            log.warning("reconcile of %s/%s failed, again in %.0f s: %s", namespace, name,
                        RETRY_SECONDS, error)
            asyncio.get_running_loop().call_later(RETRY_SECONDS, queue.put_nowait,
                                                  (namespace, name))


async def main(kubeconfig: str, namespace: str = "*") -> None:
    client = AsyncClient(config=KubeConfig.from_file(kubeconfig), field_manager=MANAGER)
    while True:  # its records' namespace, made once (an error: tried again)
        try:
            await client.create(Namespace(metadata=ObjectMeta(name=RECORDS)))
            break
        except ApiError as error:
            if error.status.code == 409:
                break
            log.warning("records namespace not made, again in %.0f s: %s", RETRY_SECONDS,
                        error)
            await asyncio.sleep(RETRY_SECONDS)
    queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    log.info("cache operator started; records in %s", RECORDS)
    await asyncio.gather(watch(client, Cache, queue, namespace=namespace),
                         watch(client, Deployment, queue, "Cache", namespace),
                         work(client, queue))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", default=os.environ.get("WATCH_NAMESPACE") or "*",
                        help="the one namespace to watch (default: every namespace)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.kubeconfig, arguments.namespace))
