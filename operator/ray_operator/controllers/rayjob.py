"""RayJob controller: a RayCluster for the job, one submission through the Jobs API, status polling.

The job is submitted only once the RayCluster's ``state`` is ``ready`` (every Pod Running and
Ready), the stricter gate the seed compares the RayService's head-Pod gate with. The job id is
stored in status before the first submission so that the job is submitted at most once: after a
restart or a lost answer the controller asks the Jobs API for that id before submitting again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import yaml

from ..constants import (
    CREATED_BY_RAYJOB,
    LABEL_CLUSTER,
    LABEL_CREATED_BY,
    RAY_API_VERSION,
    RAY_GROUP,
    RAYJOB_FINALIZER,
)
from ..dashboard import DashboardClient, DashboardError, JobAlreadyExists
from ..resources import RAYCLUSTERS, RAYJOBS
from ..runtime import ApiError, Conflict, KeyLogger, NotFound, Result
from ..runtime.mapping import owned_handler, primary_handler
from ..runtime.objects import Obj, is_deleting, meta
from ..runtime.retry import update_with_retry
from ..runtime.store import labels_match
from ..runtime.timeutil import from_epoch_ms, now_rfc3339, seconds_since
from .common import owner_reference, random_suffix
from .context import Context
from .podbuilder import head_service_name
from .raycluster import STATE_READY
from .statusdiff import status_changed
from .writes import create_ray_cluster, replace_status

# JobDeploymentStatus values (KubeRay).
INITIALIZING = "Initializing"
FAILED_TO_GET_OR_CREATE_CLUSTER = "FailedToGetOrCreateRayCluster"
WAIT_FOR_DASHBOARD = "WaitForDashboard"
FAILED_JOB_DEPLOY = "FailedJobDeploy"
RUNNING = "Running"
FAILED_TO_GET_JOB_STATUS = "FailedToGetJobStatus"
COMPLETE = "Complete"

# Ray job statuses.
JOB_PENDING = "PENDING"
JOB_RUNNING = "RUNNING"
JOB_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


class RayJobController:
    name = "rayjob"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.jobs = ctx.informers.informer(RAYJOBS)
        self.clusters = ctx.informers.informer(RAYCLUSTERS)

    def register(self, enqueue: Callable[[str], None]) -> None:
        self.jobs.add_handler(primary_handler(enqueue))
        self.clusters.add_handler(owned_handler(enqueue, "RayJob", RAY_GROUP))

    @property
    def _requeue(self) -> Result:
        return Result(self.ctx.config.job_requeue_seconds)

    def reconcile(self, key: str, log: KeyLogger) -> Result | None:
        job = self.jobs.store.get(key)
        if job is None:
            return None
        if is_deleting(job):
            self._finalize(job, log)
            return None
        if RAYJOB_FINALIZER not in (meta(job).get("finalizers") or []):
            job = self._add_finalizer(job)

        old_status: Obj = job.get("status") or {}
        status = copy.deepcopy(old_status)
        status["observedGeneration"] = meta(job).get("generation")
        spec = job.get("spec") or {}

        if not status.get("jobId"):
            status["jobId"] = spec.get("jobId") or f"{meta(job)['name']}-{random_suffix()}"
            if not spec.get("clusterSelector"):
                status["rayClusterName"] = f"{meta(job)['name']}-raycluster-{random_suffix()}"
            status["jobDeploymentStatus"] = INITIALIZING
            self._write_status(job, status, log, "job id and cluster name chosen")
            return Result(0.0)

        if status.get("jobDeploymentStatus") == COMPLETE:
            return self._after_completion(job, status, log)

        try:
            cluster = self._get_or_create_cluster(job, status, log)
        except Conflict:
            raise
        except ApiError as exc:
            cluster, problem = None, f"cannot get or create the RayCluster: {exc}"
        else:
            problem = "" if cluster else _selector_problem(spec)
        if cluster is None:
            return self._set_state(
                job, old_status, status, FAILED_TO_GET_OR_CREATE_CLUSTER, problem, log
            )
        status["rayClusterName"] = meta(cluster)["name"]
        status["rayClusterStatus"] = cluster.get("status") or {}
        if (cluster.get("status") or {}).get("state") != STATE_READY:
            return self._set_state(
                job, old_status, status, INITIALIZING, "waiting for the RayCluster to be ready", log
            )
        return self._drive_job(job, old_status, status, cluster, log)

    def _drive_job(
        self, job: Obj, old_status: Obj, status: Obj, cluster: Obj, log: KeyLogger
    ) -> Result | None:
        """Ask the Jobs API about the job id; submit it if unknown, else record its progress."""
        namespace, cluster_name = meta(job)["namespace"], meta(cluster)["name"]
        try:
            url = self.ctx.config.dashboard_resolver(
                namespace, cluster_name, head_service_name(cluster_name)
            )
        except Exception as exc:
            return self._set_state(
                job, old_status, status, WAIT_FOR_DASHBOARD, f"no Dashboard address: {exc}", log
            )
        status["dashboardURL"] = url
        client = DashboardClient(url, self.ctx.http)
        job_id = status["jobId"]
        try:
            info = client.get_job(job_id)
        except DashboardError as exc:
            return self._set_state(job, old_status, status, FAILED_TO_GET_JOB_STATUS, str(exc), log)

        if info is None:
            try:
                self._submit(job, client, job_id, log)
            except (DashboardError, yaml.YAMLError) as exc:
                return self._set_state(job, old_status, status, FAILED_JOB_DEPLOY, str(exc), log)
            return self._set_state(job, old_status, status, RUNNING, f"submitted job {job_id}", log)

        status["jobStatus"] = info.status
        status["message"] = info.message
        if info.start_time_ms:
            status["startTime"] = from_epoch_ms(info.start_time_ms)
        deployment = RUNNING
        if info.status in JOB_TERMINAL:
            deployment = COMPLETE
            status["endTime"] = (
                from_epoch_ms(info.end_time_ms) or status.get("endTime") or now_rfc3339()
            )
        status["jobDeploymentStatus"] = deployment
        if status_changed(old_status, status):
            self._write_status(job, status, log, f"job {info.status}")
        if deployment == COMPLETE:
            return self._after_completion(job, status, log)
        return self._requeue

    def _submit(self, job: Obj, client: DashboardClient, job_id: str, log: KeyLogger) -> None:
        spec = job.get("spec") or {}
        runtime_env = yaml.safe_load(spec["runtimeEnvYAML"]) if spec.get("runtimeEnvYAML") else None
        try:
            client.submit_job(
                job_id=job_id,
                entrypoint=spec.get("entrypoint") or "",
                runtime_env=runtime_env,
                metadata=spec.get("metadata") or None,
            )
        except JobAlreadyExists:
            log.info("job %s was already submitted", job_id)
            return
        log.info("submitted job %s to %s", job_id, client.base_url)
        self.ctx.recorder.normal(job, "Submitted", f"Submitted job {job_id}")

    def _set_state(
        self, job: Obj, old_status: Obj, status: Obj, deployment: str, message: str, log: KeyLogger
    ) -> Result:
        status["jobDeploymentStatus"] = deployment
        status["message"] = message
        if status_changed(old_status, status):
            self._write_status(job, status, log, deployment)
        return self._requeue

    def _write_status(self, job: Obj, status: Obj, log: KeyLogger, reason: str) -> None:
        """The one place RayJob status is written (PUT /status); on a conflict the live object
        goes into the cache and the Conflict propagates, so the reconcile reruns on fresh data."""
        replace_status(self.ctx.kube, self.jobs.store, RAYJOBS, job, status)
        log.info(
            "status written (%s): deployment=%s job=%s",
            reason,
            status.get("jobDeploymentStatus"),
            status.get("jobStatus") or "-",
        )

    def _get_or_create_cluster(self, job: Obj, status: Obj, log: KeyLogger) -> Obj | None:
        namespace = meta(job)["namespace"]
        spec = job.get("spec") or {}
        selector: dict[str, str] = spec.get("clusterSelector") or {}
        if selector:
            if LABEL_CLUSTER in selector:
                return self.clusters.store.get(f"{namespace}/{selector[LABEL_CLUSTER]}")
            matches = sorted(
                (c for c in self.clusters.store.select(namespace) if labels_match(c, selector)),
                key=lambda c: meta(c)["name"],
            )
            return matches[0] if matches else None
        name = status["rayClusterName"]
        cluster = self.clusters.store.get(f"{namespace}/{name}")
        if cluster is not None or not spec.get("rayClusterSpec"):
            return cluster
        body = {
            "apiVersion": RAY_API_VERSION,
            "kind": "RayCluster",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {LABEL_CREATED_BY: CREATED_BY_RAYJOB},
                "ownerReferences": [owner_reference(job)],
            },
            "spec": copy.deepcopy(spec["rayClusterSpec"]),
        }
        return create_ray_cluster(self.ctx, self.clusters.store, job, body, log)

    def _after_completion(self, job: Obj, status: Obj, log: KeyLogger) -> Result | None:
        """With ``shutdownAfterJobFinishes``, delete the cluster ``ttlSecondsAfterFinished`` after
        the job ended (never a cluster picked by ``clusterSelector``: it is not the job's)."""
        spec = job.get("spec") or {}
        if not spec.get("shutdownAfterJobFinishes") or spec.get("clusterSelector"):
            return None
        elapsed = seconds_since(status.get("endTime")) or 0.0
        remaining = float(spec.get("ttlSecondsAfterFinished") or 0) - elapsed
        if remaining > 0:
            return Result(remaining)
        namespace, name = meta(job)["namespace"], status.get("rayClusterName")
        cluster = self.clusters.store.get(f"{namespace}/{name}") if name else None
        if cluster is None or is_deleting(cluster):
            return None
        try:
            self.ctx.kube.delete(RAYCLUSTERS, namespace, str(name), propagation_policy="Background")
        except NotFound:
            return None
        log.info("job finished; deleted RayCluster %s", name)
        self.ctx.recorder.normal(
            job, "Deleted", f"Deleted RayCluster {name} after the job finished"
        )
        return None

    def _add_finalizer(self, job: Obj) -> Obj:
        namespace, name = meta(job)["namespace"], meta(job)["name"]

        def add(obj: Obj) -> bool:
            finalizers = obj["metadata"].setdefault("finalizers", [])
            if RAYJOB_FINALIZER in finalizers:
                return False
            finalizers.append(RAYJOB_FINALIZER)
            return True

        written = update_with_retry(self.ctx.kube, RAYJOBS, namespace, name, add, current=job)
        if written is None:
            return job
        self.jobs.store.upsert(written)
        return written

    def _finalize(self, job: Obj, log: KeyLogger) -> None:
        """Stop a job that may still run (best effort, as KubeRay), then release the RayJob."""
        if RAYJOB_FINALIZER not in (meta(job).get("finalizers") or []):
            return
        status = job.get("status") or {}
        job_id, cluster_name = status.get("jobId"), status.get("rayClusterName")
        maybe_running = status.get("jobStatus") in (JOB_PENDING, JOB_RUNNING) or (
            status.get("jobDeploymentStatus") == RUNNING
            and status.get("jobStatus") not in JOB_TERMINAL
        )
        if maybe_running and job_id and cluster_name:
            self._stop_job(job, str(job_id), str(cluster_name), log)

        def remove(obj: Obj) -> bool:
            finalizers = obj["metadata"].get("finalizers") or []
            if RAYJOB_FINALIZER not in finalizers:
                return False
            obj["metadata"]["finalizers"] = [f for f in finalizers if f != RAYJOB_FINALIZER]
            return True

        namespace, name = meta(job)["namespace"], meta(job)["name"]
        try:
            written = update_with_retry(
                self.ctx.kube, RAYJOBS, namespace, name, remove, current=job
            )
        except NotFound:
            return
        if written is not None:
            self.jobs.store.upsert(written)
            log.info("removed finalizer %s", RAYJOB_FINALIZER)

    def _stop_job(self, job: Obj, job_id: str, cluster_name: str, log: KeyLogger) -> None:
        namespace = meta(job)["namespace"]
        try:
            url = self.ctx.config.dashboard_resolver(
                namespace, cluster_name, head_service_name(cluster_name)
            )
            stopped = DashboardClient(url, self.ctx.http).stop_job(job_id)
        except Exception as exc:  # unreachable Dashboard, resolver failure, HTTP error
            log.warning("could not stop job %s: %s", job_id, exc)
        else:
            log.info("stop job %s on deletion: stopped=%s", job_id, stopped)
            self.ctx.recorder.normal(job, "Stopped", f"Stopped job {job_id} (RayJob deleted)")


def _selector_problem(spec: Obj) -> str:
    if spec.get("clusterSelector"):
        return f"no RayCluster matches clusterSelector {spec['clusterSelector']}"
    return "the RayJob has neither rayClusterSpec nor clusterSelector"
