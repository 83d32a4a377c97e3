"""The Job controller, after pkg/controller/job (job_controller.go), NonIndexed Jobs only:
`parallelism` active pods until `completions` succeeded (or, without `completions`, until
one succeeded and the others finished). Each pod carries the
`batch.kubernetes.io/job-tracking` finalizer; a finished pod (Succeeded, Failed, or deleted
before succeeding: an evicted pod counts as failed, `isPodFailed`) is counted in the status
before its finalizer is removed, so a pod that leaves is never lost or counted twice. With
the default `podReplacementPolicy: TerminatingOrFailed` a terminating pod is replaced at once.
Past `backoffLimit` failures the Job gets the interim FailureTarget condition and its active
pods are deleted; Failed follows once none is terminating. Success is SuccessCriteriaMet,
then Complete (with `completionTime`) once none is terminating, as kube-controller-manager
1.31+ writes them (JobManagedBy, JobPodReplacementPolicy), with the Completed or
BackoffLimitExceeded event. A suspended Job runs no pod (Suspended: JobSuspended, then
JobResumed). Not simulated: the failure back-off before a replacement, pod failure
policies, Indexed completion, and `status.uncountedTerminatedPods` (the status write and the
finalizer removal are two steps here)."""

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


def _true(job: Obj, type_: str) -> Obj | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


def finished_condition(job: Obj) -> Obj | None:
    """The Job's Complete or Failed condition, if it has finished."""
    return _true(job, "Complete") or _true(job, "Failed")


COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


def ttl_remaining(job: Obj, now: dt.datetime) -> float | None:
    """Seconds until a finished Job's `ttlSecondsAfterFinished` runs out (<= 0: expired);
    None if it has not finished or keeps no TTL (pkg/controller/ttlafterfinished)."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    finished = finished_condition(job)
    if not isinstance(ttl, int) or finished is None:
        return None
    try:
        at = dt.datetime.fromisoformat(str(finished.get("lastTransitionTime")))
    except ValueError:
        return None
    return (at - now).total_seconds() + ttl


def spec_of(job: Obj) -> Obj:
    return dict(job.get("spec") or {})


def _suspension(
    conditions: list[Obj], suspended: bool, now: str
) -> tuple[list[Obj], tuple[str, str, str]] | None:
    """The Suspended condition's change, and its event: True (JobSuspended) while
    `spec.suspend`, False (JobResumed) once resumed; None when nothing changes."""
    current = next((c for c in conditions if c.get("type") == "Suspended"), None)
    if suspended and (current is None or current.get("status") != "True"):
        reason, message, status, event = "JobSuspended", "Job suspended", "True", "Suspended"
    elif not suspended and current is not None and current.get("status") == "True":
        reason, message, status, event = "JobResumed", "Job resumed", "False", "Resumed"
    else:
        return None
    changed = {"type": "Suspended", "status": status, "reason": reason, "message": message,
               "lastProbeTime": now, "lastTransitionTime": now}  # fmt: skip
    kept = [c for c in conditions if c.get("type") != "Suspended"]
    return [*kept, changed], ("Normal", event, message)


class JobController(PodOwnerController):
    """The Job controller, with the TTL-after-finished controller's one job (upstream's is a
    controller of its own, `ttl-after-finished-controller`): a finished Job whose
    `ttlSecondsAfterFinished` ran out is deleted, its pods with it (Foreground)."""

    name = "job-controller"
    api_version = "batch/v1"
    plural = "jobs"
    kind = "Job"
    observes_generation = False
    kept_empty = ("uncountedTerminatedPods",)  # written as {} by the real controller

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self._counted: set[str] = set()  # uids of finished pods already in a status

    async def reconcile(self, key: Key) -> float | None:
        job = self.owners.get(*key)
        if job is None:
            return None
        now_dt = dt.datetime.now(dt.UTC)
        pods = await self.claimed_pods(job)
        if finished_condition(job) is not None:
            for pod in pods:  # a pod the last sync could not release
                if TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or []):
                    await self._release(pod)
            return await self._expire(job, now_dt)
        spec = job.get("spec") or {}
        status = jsoncodec.copy(job.get("status") or {})
        now = rfc3339(now_dt)
        suspended = bool(spec_of(job).get("suspend"))
        if not suspended:
            status.setdefault("startTime", now)
        conditions: list[Obj] = list(status.get("conditions") or [])
        # Counted first, then released: the status is the record of a pod that has left.
        tracked = [p for p in pods if is_finished(p) and TRACKING_FINALIZER in
                   (p["metadata"].get("finalizers") or [])]  # fmt: skip
        # The cache may still show a counted pod's finalizer (finalizer expectations).
        newly = [p for p in tracked if p["metadata"]["uid"] not in self._counted]
        succeeded = int(status.get("succeeded") or 0) + sum(
            1 for p in newly if _phase(p) == "Succeeded"
        )
        failed = int(status.get("failed") or 0) + sum(1 for p in newly if is_pod_failed(p))
        active = [p for p in pods if not is_finished(p)]
        terminating = sum(
            1 for p in pods if p["metadata"].get("deletionTimestamp") and _phase(p) not in
            ("Succeeded", "Failed")
        )  # fmt: skip
        completions = spec.get("completions")
        created = 0
        parallelism = int(spec.get("parallelism", 1))
        # The interim conditions first (kube-controller-manager >= 1.31): FailureTarget or
        # SuccessCriteriaMet; Failed or Complete once no pod of the Job is terminating.
        target = _true(job, "FailureTarget")
        success = _true(job, "SuccessCriteriaMet")
        if target is None and success is None and failed > int(spec.get("backoffLimit", 6)):
            target = _condition("FailureTarget", *BACKOFF_LIMIT_EXCEEDED, now)
            conditions.append(target)
        if target is not None:
            for pod in active:
                await self.delete_pod(job, pod)
                terminating += 1
            active = []
        elif suspended:
            for pod in active:  # a suspended Job runs no pod
                await self.delete_pod(job, pod)
                terminating += 1
            active = []
        elif success is None:
            wanted = (
                parallelism
                if completions is None
                else min(parallelism, int(completions) - succeeded)
            )
            if completions is None and succeeded > 0:
                wanted = len(active)  # a pod succeeded: the others finish by themselves
            # TerminatingOrFailed: a terminating pod is replaced at once.
            for _ in range(max(wanted - len(active), 0)):
                await self.create_pod(job, job_pod(job))
                created += 1
            done = succeeded > 0 if completions is None else succeeded >= int(completions)
            if done and not active and not created:
                success = _condition("SuccessCriteriaMet", *COMPLETIONS_REACHED, now)
                conditions.append(success)
        event: tuple[str, str, str] | None = None
        suspension = _suspension(conditions, suspended, now)
        if suspension is not None:
            conditions, event = suspension
            if not suspended:
                status["startTime"] = now  # a resumed Job starts afresh (activeDeadline)
        if terminating == 0 and target is not None:
            conditions.append(_condition("Failed", target["reason"], target["message"], now))
            event = ("Warning", target["reason"], target["message"])
        elif terminating == 0 and success is not None:
            conditions.append(_condition("Complete", success["reason"], success["message"], now))
            status["completionTime"] = now
            event = ("Normal", "Completed", "Job completed")
        status["conditions"] = conditions
        status["uncountedTerminatedPods"] = {}
        status["terminating"] = terminating
        status["ready"] = sum(1 for p in active if is_pod_ready(p))
        status["active"] = len(active) + created or None
        status["succeeded"] = succeeded or None
        status["failed"] = failed or None
        await self.write_status(job, status)
        self._counted.update(p["metadata"]["uid"] for p in newly)
        for pod in tracked:
            await self._release(pod)
        if event is not None:
            await self.recorder.emit(job, *event)
        if finished_condition({"status": status}) is not None:
            remaining = ttl_remaining({**job, "status": status}, now_dt)
            return None if remaining is None else max(remaining, 0.0)
        return None

    async def _expire(self, job: Obj, now: dt.datetime) -> float | None:
        remaining = ttl_remaining(job, now)
        if remaining is None or remaining > 0:
            return remaining
        meta = job["metadata"]
        path = resource_path(self.api_version, self.plural, meta.get("namespace"), meta["name"])
        options = {"propagationPolicy": "Foreground", "preconditions": {"uid": meta["uid"]}}
        try:
            await self.client.delete(path, options)
        except ApiStatusError as err:
            if err.code not in (404, 409):
                raise
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
