"""The fake Dashboard's Jobs API: submit, list, get and stop under ``/api/jobs/``.

A job starts PENDING and moves only when the test says so (``set_job_status``) or when it is
stopped; ids are unique per dashboard, as Ray's submission ids are per cluster.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from .api import Answer, BadRequest, require_json

JOBS_PATH = "/api/jobs/"
JOB_STATUSES = frozenset({"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"})
JOB_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


class JobsApi:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._jobs: dict[str, dict[str, Any]] = {}

    # ---------------------------------------------------------------- state, for tests

    def jobs(self) -> dict[str, dict[str, Any]]:
        """Every job by id (a copy)."""
        with self._lock:
            return json.loads(json.dumps(self._jobs))

    def job(self, job_id: str) -> dict[str, Any]:
        with self._lock:
            if job_id not in self._jobs:
                raise KeyError(f"no job {job_id!r}; known: {sorted(self._jobs)}")
            return dict(self._jobs[job_id])

    def set_job_status(self, job_id: str, status: str, message: str = "") -> None:
        """Move a job on; a terminal status also stamps ``end_time`` (once)."""
        if status not in JOB_STATUSES:
            raise ValueError(f"job status must be one of {sorted(JOB_STATUSES)}")
        with self._lock:
            if job_id not in self._jobs:
                raise KeyError(f"no job {job_id!r}; known: {sorted(self._jobs)}")
            job = self._jobs[job_id]
            job["status"], job["message"] = status, message
            if status in JOB_TERMINAL and not job.get("end_time"):
                job["end_time"] = int(time.time() * 1000)

    # -------------------------------------------------------------------------- HTTP

    def answer(self, method: str, route: str, body: Any) -> Answer | None:
        if route == JOBS_PATH and method == "POST":
            return self._submit(require_json(body))
        if route == JOBS_PATH and method == "GET":
            return 200, list(self.jobs().values())
        if route.startswith(JOBS_PATH):
            rest = route[len(JOBS_PATH) :].strip("/").split("/")
            if len(rest) == 1 and method == "GET":
                return self._get(rest[0])
            if len(rest) == 2 and rest[1] == "stop" and method == "POST":
                return self._stop(rest[0])
        return None

    def _submit(self, body: Any) -> Answer:
        if not isinstance(body, dict):
            raise BadRequest("JobSubmitRequest must be a JSON object")
        entrypoint = body.get("entrypoint")
        if not isinstance(entrypoint, str) or not entrypoint:
            raise BadRequest("JobSubmitRequest failed validation: 'entrypoint' must be a string")
        submission_id, legacy_id = body.get("submission_id"), body.get("job_id")
        if submission_id and legacy_id and submission_id != legacy_id:
            raise BadRequest("job_id and submission_id must match when both are given")
        job_id = str(submission_id or legacy_id or f"raysubmit_{uuid.uuid4().hex[:16]}")
        for key in ("runtime_env", "metadata"):
            if body.get(key) is not None and not isinstance(body[key], dict):
                raise BadRequest(f"JobSubmitRequest failed validation: '{key}' must be an object")
        with self._lock:
            if job_id in self._jobs:
                raise BadRequest(
                    f"Job with submission_id {job_id} already exists. "
                    "Please use a different submission_id."
                )
            self._jobs[job_id] = {
                "type": "SUBMISSION",
                "job_id": job_id,
                "submission_id": job_id,
                "driver_info": None,
                "status": "PENDING",
                "entrypoint": entrypoint,
                "message": "Job has not started yet.",
                "error_type": None,
                "start_time": int(time.time() * 1000),
                "end_time": None,
                "metadata": body.get("metadata") or {},
                "runtime_env": body.get("runtime_env") or {},
            }
        return 200, {"job_id": job_id, "submission_id": job_id}

    def _get(self, job_id: str) -> Answer:
        with self._lock:
            if job_id not in self._jobs:
                return 404, f"Job {job_id} does not exist"
            return 200, dict(self._jobs[job_id])

    def _stop(self, job_id: str) -> Answer:
        with self._lock:
            if job_id not in self._jobs:
                return 404, f"Job {job_id} does not exist"
            job = self._jobs[job_id]
            if job["status"] in JOB_TERMINAL:
                return 200, {"stopped": False}
            self.set_job_status(job_id, "STOPPED", "Job was intentionally stopped.")
            return 200, {"stopped": True}
