"""An example kopf operator: a WebApp gets a Pod; the Pod's phase is mirrored into its status.

Run by the tests next to this directory with ``run_operator(KopfOperator(...))``, in a
``kopf run`` subprocess and in a thread.  The handlers use the official client's default
configuration, which kopf's login (or the framework, in a thread) sets up.
"""

from __future__ import annotations

from typing import Any

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "kopf.example.com", "v1", "webapps"
#: Seconds before kopf runs a failed handler again.  kopf's default is 60: found by
#: --envtest-explore=errors, a transient 500 on the Pod's create (or on the status patch)
#: left the WebApp without its Pod (or its phase) for a minute.
RETRY_SECONDS = 1.0


@kopf.on.create(GROUP, VERSION, PLURAL, backoff=RETRY_SECONDS)
def create_pod(spec: dict[str, Any], name: str, namespace: str, **_: Any) -> dict[str, str]:
    """One Pod per WebApp, owned by it; kopf stores the return value in status.create_pod."""
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{name}-web", "labels": {"webapp": name}},
        "spec": {"containers": [{"name": "web", "image": spec.get("image", "nginx")}]},
    }
    kopf.adopt(pod)
    try:
        kubernetes.client.CoreV1Api().create_namespaced_pod(namespace, pod)
    except kubernetes.client.ApiException as error:
        # Made already by an instance killed before kopf stored the handler's success (found
        # by --envtest-explore=crashes: the retried handler failed on AlreadyExists for ever).
        if error.status != 409:
            raise
    return {"pod": pod["metadata"]["name"]}


@kopf.on.field("", "v1", "pods", field="status.phase", labels={"webapp": kopf.PRESENT},
               backoff=RETRY_SECONDS)
def mirror_phase(new: str | None, labels: dict[str, str], namespace: str, **_: Any) -> None:
    """The Pod's phase goes into its WebApp's status.phase (the operator's own status write)."""
    kubernetes.client.CustomObjectsApi().patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, labels["webapp"], {"status": {"phase": new}})
