"""Names shared by the controllers: API coordinates, labels and annotations as KubeRay spells them.

They live in one place because the labels are the contract between controllers (the RayService finds
its clusters and head Pods through them) and with users' tooling.
"""

from __future__ import annotations

RAY_GROUP = "ray.io"
RAY_VERSION = "v1"
RAY_API_VERSION = f"{RAY_GROUP}/{RAY_VERSION}"

# Pod and Service labels (KubeRay's common/constant.go).
LABEL_CLUSTER = "ray.io/cluster"
LABEL_NODE_TYPE = "ray.io/node-type"
LABEL_GROUP = "ray.io/group"
LABEL_IDENTIFIER = "ray.io/identifier"
LABEL_IS_RAY_NODE = "ray.io/is-ray-node"
LABEL_SERVE = "ray.io/serve"
LABEL_SERVICE = "ray.io/service"
LABEL_APP_NAME = "app.kubernetes.io/name"
LABEL_CREATED_BY = "app.kubernetes.io/created-by"

NODE_HEAD = "head"
NODE_WORKER = "worker"
HEAD_GROUP = "headgroup"
APP_NAME = "kuberay"
CREATED_BY_OPERATOR = "kuberay-operator"
CREATED_BY_RAYSERVICE = "rayservice"
CREATED_BY_RAYJOB = "rayjob"

ANNOTATION_CLUSTER_HASH = "ray.io/cluster-hash"
# The worker scaling fields (replicas, workersToDelete) last copied from a RayService to one of its
# clusters; lets the RayService tell its own edits apart from the autoscaler's
# (see controllers/rayservice/clusters.py).
ANNOTATION_SERVICE_SCALING = "ray.io/rayservice-worker-scaling"

RAYJOB_FINALIZER = "ray.io/rayjob-finalizer"

# Head container ports (name -> port) used when the head container declares none of that name.
DEFAULT_HEAD_PORTS: dict[str, int] = {
    "client": 10001,
    "gcs-server": 6379,
    "dashboard": 8265,
    "metrics": 8080,
    "serve": 8000,
}
SERVE_PORT_NAME = "serve"

COMPONENT = "ray-operator"
