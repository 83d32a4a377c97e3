"""The Job controller, after pkg/controller/job (job_controller.go), NonIndexed Jobs only:
`parallelism` active pods until `completions` succeeded. Each pod carries the
`batch.kubernetes.io/job-tracking` finalizer; a finished pod (Succeeded, Failed, or deleted
before succeeding: an evicted pod counts as failed, `isPodFailed`) is counted in the status
before its finalizer is removed, so a pod that leaves is never lost or counted twice. With
the default `podReplacementPolicy: TerminatingOrFailed` a terminating pod is replaced at once.
Past `backoffLimit` failures the Job fails and its active pods are deleted. Not simulated:
the failure back-off before a replacement, pod failure policies, Indexed completion,
suspension, and `status.uncountedTerminatedPods` (the status write and the finalizer removal
are two steps here)."""

from __future__ import annotations

import datetime as dt

from kubesim import jsoncodec
from kubesim.types import Key, Obj

from ..apiserver.meta import rfc3339
from ..client import ApiStatusError, KubeClient, resource_path
from .podowner import PodOwnerController
from .podutil import is_pod_ready
from .replicaset import pod_from_template

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def is_pod_failed(pod: Obj) -> bool:
    """isPodFailed with the default replacement policy: Failed, or deleted unsucceeded."""
    if _phase(pod) == "Failed":
        return True
    return bool(pod["metadata"].get("deletionTimestamp")) and _phase(pod) != "Succeeded"


def is_finished(pod: Obj) -> bool:
    return _phase(pod) == "Succeeded" or is_pod_failed(pod)


def job_pod(job: Obj) -> Obj:
    pod = pod_from_template(job)
    pod["metadata"]["finalizers"] = [
        *pod["metadata"].get("finalizers", []), TRACKING_FINALIZER,
    ]  # fmt: skip
    return pod


def _condition(type_: str, reason: str, message: str, now: str) -> Obj:
    return {"type": type_, "status": "True", "reason": reason, "message": message,
            "lastProbeTime": now, "lastTransitionTime": now}  # fmt: skip


def finished_condition(job: Obj) -> Obj | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return dict(cond)
    return None


class JobController(PodOwnerController):
    name = "job-controller"
    api_version = "batch/v1"
    plural = "jobs"
    kind = "Job"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self._counted: set[str] = set()  # uids of finished pods already in a status

    async def reconcile(self, key: Key) -> float | None:
        job = self.owners.get(*key)
        if job is None:
            return None
        pods = await self.claimed_pods(job)
        spec = job.get("spec") or {}
        status = jsoncodec.copy(job.get("status") or {})
        now = rfc3339(dt.datetime.now(dt.UTC))
        status.setdefault("startTime", now)
        # Counted first, then released: the status is the record of a pod that has left.
        tracked = [p for p in pods if is_finished(p) and TRACKING_FINALIZER in
                   (p["metadata"].get("finalizers") or [])]  # fmt: skip
        # The cache may still show a counted pod's finalizer (finalizer expectations).
        newly = [p for p in tracked if p["metadata"]["uid"] not in self._counted]
        status["succeeded"] = int(status.get("succeeded") or 0) + sum(
            1 for p in newly if _phase(p) == "Succeeded"
        )
        status["failed"] = int(status.get("failed") or 0) + sum(
            1 for p in newly if is_pod_failed(p)
        )
        active = [p for p in pods if not is_finished(p)]
        completions = int(spec.get("completions") or 1)
        parallelism = int(spec.get("parallelism", 1))
        finished = finished_condition(job)
        if finished is None and status["succeeded"] >= completions:
            finished = _condition(
                "Complete", "CompletionsReached", "Reached expected number of succeeded pods", now
            )
            status["conditions"] = [
                _condition("SuccessCriteriaMet", "CompletionsReached",
                           "Reached expected number of succeeded pods", now),
                finished,
            ]  # fmt: skip
            status["completionTime"] = now
        elif finished is None and status["failed"] > int(spec.get("backoffLimit", 6)):
            finished = _condition(
                "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit", now
            )
            status["conditions"] = [
                _condition("FailureTarget", "BackoffLimitExceeded",
                           "Job has reached the specified backoff limit", now),
                finished,
            ]  # fmt: skip
        status["terminating"] = sum(
            1 for p in pods if p["metadata"].get("deletionTimestamp") and _phase(p) not in
            ("Succeeded", "Failed")
        )  # fmt: skip
        status["ready"] = sum(1 for p in active if is_pod_ready(p))
        status["active"] = len(active) or None
        status["succeeded"] = status["succeeded"] or None
        status["failed"] = status["failed"] or None
        await self.write_status(job, status)
        self._counted.update(p["metadata"]["uid"] for p in newly)
        for pod in tracked:
            await self._release(pod)
        if finished is not None:
            for pod in active:
                await self.delete_pod(job, pod)
            return None
        wanted = min(parallelism, completions - int(status["succeeded"] or 0)) - len(active)
        for _ in range(max(wanted, 0)):
            await self.create_pod(job, job_pod(job))
        return None

    async def _release(self, pod: Obj) -> None:
        meta = pod["metadata"]
        path = resource_path("v1", "pods", meta.get("namespace"), meta["name"])
        kept = [f for f in meta.get("finalizers") or [] if f != TRACKING_FINALIZER]
        try:
            await self.client.patch(path, {"metadata": {"finalizers": kept or None}})
        except ApiStatusError as err:
            if err.code != 404:
                raise
