"""The CronJob controller, after pkg/controller/cronjob (cronjob_controllerv2.go, utils.go):
at each time the schedule (`kubesim/cron.py`, in the CronJob's `timeZone`) says, a Job
from `jobTemplate`, named `<cronjob>-<scheduled time in minutes since the epoch>` and
annotated with `batch.kubernetes.io/cronjob-scheduled-timestamp`; `status.active`,
`lastScheduleTime` and `lastSuccessfulTime` kept from the Jobs it owns;
`startingDeadlineSeconds` (a missed start: MissSchedule), `concurrencyPolicy` (Allow,
Forbid: JobAlreadyActive, Replace: the running Jobs deleted first), `suspend`, and the
`successfulJobsHistoryLimit` / `failedJobsHistoryLimit` of finished Jobs (the oldest
deleted). The key is requeued for the next scheduled time (plus upstream's 100 ms), so a
cluster without CronJobs does no work beyond its informers."""

from __future__ import annotations

import datetime as dt

from kubesim import cron, jsoncodec
from kubesim.cluster.event_recorder import EventRecorder
from kubesim.types import Key, Obj

from ..apiserver.meta import parse_time, rfc3339
from ..client import ApiStatusError, KubeClient, resource_path
from . import ownership
from .job import finished_condition
from .runtime import Controller, key_of

SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
NEXT_SCHEDULE_DELTA = 0.1  # nextScheduleDelta: 100 ms past the scheduled time
MANY_MISSED = 100


def go_rfc3339(moment: dt.datetime, zone: dt.tzinfo) -> str:
    """Go's time.RFC3339 of `moment` in `zone`: `Z` for UTC, else the offset."""
    text = moment.astimezone(zone).replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def most_recent(
    cronjob: Obj, now: dt.datetime, schedule: cron.Schedule, zone: dt.tzinfo, deadline: bool
) -> tuple[dt.datetime, dt.datetime | None, int]:
    """mostRecentScheduleTime: (the earliest time considered, the most recent scheduled time
    not after `now` or None, how many were missed). Raises CronError for a schedule whose
    consecutive times are less than a second apart or that never comes."""
    status = cronjob.get("status") or {}
    last = status.get("lastScheduleTime")
    earliest = parse_time(last or cronjob["metadata"]["creationTimestamp"])
    starting = (cronjob.get("spec") or {}).get("startingDeadlineSeconds")
    if deadline and isinstance(starting, int):
        earliest = max(earliest, now - dt.timedelta(seconds=starting))
    t1 = schedule.next(earliest, zone)
    if t1 is None or now < t1:
        return earliest, None, 0
    t2 = schedule.next(t1, zone)
    if t2 is None or now < t2:
        return earliest, t1, 0
    between = round((t2 - t1).total_seconds())
    if between < 1:
        raise cron.CronError("time difference between two schedules is less than 1 second")
    missed = int((now - t1).total_seconds()) // between + 1
    recent: dt.datetime | None = None
    t: dt.datetime | None = schedule.next(t1 + dt.timedelta(seconds=(missed - 2) * between), zone)
    while t is not None and t <= now:
        recent = t
        t = schedule.next(t, zone)
    return earliest, recent, missed


def next_delay(cronjob: Obj, now: dt.datetime, schedule: cron.Schedule, zone: dt.tzinfo) -> float:
    """nextScheduleTimeDuration: seconds until the next scheduled time, plus 100 ms."""
    try:
        earliest, recent, missed = most_recent(cronjob, now, schedule, zone, deadline=False)
        start = recent or (earliest if missed == 0 else now)
    except cron.CronError:
        start = now
    upcoming = schedule.next(start, zone)
    if upcoming is None:
        return 24 * 3600.0
    return max((upcoming - now).total_seconds() + NEXT_SCHEDULE_DELTA, 0.0)


def job_from_template(cronjob: Obj, scheduled: dt.datetime, zone: dt.tzinfo) -> Obj:
    """getJobFromTemplate2."""
    meta = cronjob["metadata"]
    template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[SCHEDULED_TIMESTAMP] = go_rfc3339(scheduled, zone)
    job_meta: Obj = {
        "name": job_name(meta["name"], scheduled),
        "namespace": meta.get("namespace", ""),
        "annotations": annotations,
        "ownerReferences": [
            ownership.new_controller_ref({**cronjob, "apiVersion": "batch/v1", "kind": "CronJob"})
        ],
    }
    if template_meta.get("labels"):
        job_meta["labels"] = dict(template_meta["labels"])
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta,
            "spec": jsoncodec.copy(template.get("spec") or {})}  # fmt: skip


def job_name(cronjob: str, scheduled: dt.datetime) -> str:
    return f"{cronjob}-{int(scheduled.timestamp()) // 60}"


def _reference(job: Obj) -> Obj:
    meta = job["metadata"]
    return {"kind": "Job", "namespace": meta.get("namespace", ""), "name": meta["name"],
            "uid": meta.get("uid", ""), "apiVersion": "batch/v1",
            "resourceVersion": meta.get("resourceVersion", "")}  # fmt: skip


def _start_key(job: Obj) -> tuple[int, str, str]:
    """byJobStartTime: Jobs without a start time last, ties by name."""
    start = (job.get("status") or {}).get("startTime")
    return (0 if start else 1, str(start or ""), job["metadata"]["name"])


class CronJobController(Controller):
    name = "cronjob-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.cronjobs = self.informer("batch/v1", "cronjobs", "CronJob")
        self.jobs = self.informer("batch/v1", "jobs", "Job")
        self.recorder = EventRecorder(client, self.name)
        self.cronjobs.add_handler(lambda _type, obj, _old: self.queue.add(key_of(obj)))
        self.jobs.add_handler(self._on_job)

    def _on_job(self, _type: str, job: Obj, old: Obj | None) -> None:
        ref = ownership.controller_of(job)
        if ref is not None and ref.get("kind") == "CronJob":
            self.queue.add((job["metadata"].get("namespace", ""), str(ref.get("name"))))

    def _owned(self, cronjob: Obj) -> list[Obj]:
        namespace, uid = cronjob["metadata"].get("namespace", ""), cronjob["metadata"]["uid"]
        return [
            j for j in self.jobs.items()
            if j["metadata"].get("namespace", "") == namespace
            and (ownership.controller_of(j) or {}).get("uid") == uid
        ]  # fmt: skip

    async def reconcile(self, key: Key) -> float | None:
        cronjob = self.cronjobs.get(*key)
        if cronjob is None:
            return None
        now = dt.datetime.now(dt.UTC)
        jobs = self._owned(cronjob)
        status = jsoncodec.copy(cronjob.get("status") or {})
        delay = await self._sync(cronjob, status, jobs, now)
        await self._clean_up(cronjob, status, jobs)
        await self._write_status(cronjob, status)
        return delay

    async def _sync(
        self, cronjob: Obj, status: Obj, jobs: list[Obj], now: dt.datetime
    ) -> float | None:
        """syncCronJob: the active list from the Jobs, then at most one new Job."""
        active: list[Obj] = list(status.get("active") or [])
        uids = {a.get("uid") for a in active}
        for job in jobs:
            meta = job["metadata"]
            finished = finished_condition(job)
            if finished is None and meta["uid"] not in uids:
                await self.recorder.emit(
                    cronjob, "Warning", "UnexpectedJob",
                    f"Saw a job that the controller did not create or forgot: {meta['name']}",
                )  # fmt: skip
            elif finished is not None:
                if meta["uid"] in uids:
                    active = [a for a in active if a.get("uid") != meta["uid"]]
                    await self.recorder.emit(
                        cronjob, "Normal", "SawCompletedJob",
                        f"Saw completed job: {meta['name']}, condition: {finished['type']}",
                    )  # fmt: skip
                completed = (job.get("status") or {}).get("completionTime")
                if finished["type"] == "Complete" and completed:
                    last = status.get("lastSuccessfulTime")
                    if last is None or parse_time(completed) > parse_time(last):
                        status["lastSuccessfulTime"] = completed
        owned = {j["metadata"]["uid"] for j in jobs}
        for ref in list(active):
            if ref.get("uid") in owned:
                continue
            path = resource_path("batch/v1", "jobs", ref.get("namespace"), str(ref.get("name")))
            try:
                await self.client.get(path)
            except ApiStatusError as err:
                if err.code != 404:
                    raise
                await self.recorder.emit(
                    cronjob, "Normal", "MissingJob", f"Active job went missing: {ref.get('name')}"
                )
                active.remove(ref)
        status["active"] = active
        spec = cronjob.get("spec") or {}
        if cronjob["metadata"].get("deletionTimestamp"):
            return None
        try:
            zone = cron.zone(spec.get("timeZone"))
        except cron.CronError as err:
            message = f'invalid timeZone: "{spec.get("timeZone")}": {err}'
            await self.recorder.emit(cronjob, "Warning", "UnknownTimeZone", message)
            return None
        if spec.get("suspend"):
            return None
        schedule_text = str(spec.get("schedule", ""))
        try:
            schedule = cron.parse(schedule_text)
        except cron.CronError as err:
            message = f'unparseable schedule: "{schedule_text}" : {err}'
            await self.recorder.emit(cronjob, "Warning", "UnparseableSchedule", message)
            return None
        delay = next_delay({**cronjob, "status": status}, now, schedule, zone)
        try:
            _, scheduled, missed = most_recent(cronjob, now, schedule, zone, deadline=True)
        except cron.CronError as err:
            await self.recorder.emit(cronjob, "Warning", "InvalidSchedule",
                                     f"invalid schedule: {schedule_text} : {err}")  # fmt: skip
            return None
        if scheduled is None:
            return delay
        if missed > MANY_MISSED:
            await self.recorder.emit(
                cronjob, "Warning", "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or "
                "check clock skew",
            )  # fmt: skip
        starting = spec.get("startingDeadlineSeconds")
        if isinstance(starting, int) and scheduled + dt.timedelta(seconds=starting) < now:
            stamp = scheduled.strftime("%a, %d %b %Y %H:%M:%S +0000")
            await self.recorder.emit(cronjob, "Warning", "MissSchedule",
                                     f"Missed scheduled time to start a job: {stamp}")  # fmt: skip
            return delay
        name = job_name(cronjob["metadata"]["name"], scheduled)
        last = status.get("lastScheduleTime")
        if any(a.get("name") == name for a in active) or (
            last is not None and parse_time(last) == scheduled
        ):
            return delay
        policy = spec.get("concurrencyPolicy", "Allow")
        if policy == "Forbid" and active:
            await self.recorder.emit(
                cronjob, "Normal", "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is "
                "Forbid",
            )  # fmt: skip
            return delay
        if policy == "Replace":
            for ref in list(active):
                await self._delete_job(cronjob, str(ref.get("namespace")), str(ref.get("name")))
                active.remove(ref)
        body = job_from_template(cronjob, scheduled, zone)
        namespace = cronjob["metadata"].get("namespace", "")
        try:
            created = await self.client.create(resource_path("batch/v1", "jobs", namespace), body)
        except ApiStatusError as err:
            if err.code != 409:
                await self.recorder.emit(cronjob, "Warning", "FailedCreate",
                                         f"Error creating job: {err}")  # fmt: skip
                raise
            created = await self.client.get(resource_path("batch/v1", "jobs", namespace, name))
            ref = ownership.controller_of(created) or {}
            if ref.get("uid") != cronjob["metadata"]["uid"] or created["metadata"]["uid"] in {
                a.get("uid") for a in active
            }:
                return None
        else:
            await self.recorder.emit(cronjob, "Normal", "SuccessfulCreate", f"Created job {name}")
        active.append(_reference(created))
        status["lastScheduleTime"] = rfc3339(scheduled)
        return next_delay({**cronjob, "status": status}, now, schedule, zone)

    async def _clean_up(self, cronjob: Obj, status: Obj, jobs: list[Obj]) -> None:
        """cleanupFinishedJobs: the oldest finished Jobs past the history limits."""
        spec = cronjob.get("spec") or {}
        for kind, limit_key in (("Complete", "successfulJobsHistoryLimit"),
                                ("Failed", "failedJobsHistoryLimit")):  # fmt: skip
            limit = spec.get(limit_key)
            if not isinstance(limit, int):
                continue
            done = sorted(
                (j for j in jobs if (finished_condition(j) or {}).get("type") == kind),
                key=_start_key,
            )
            for job in done[: max(len(done) - limit, 0)]:
                meta = job["metadata"]
                await self._delete_job(cronjob, meta.get("namespace", ""), meta["name"])
                status["active"] = [a for a in status.get("active") or []
                                    if a.get("uid") != meta["uid"]]  # fmt: skip

    async def _delete_job(self, cronjob: Obj, namespace: str, name: str) -> None:
        """deleteJob: Background propagation, a SuccessfulDelete (or FailedDelete) event."""
        path = resource_path("batch/v1", "jobs", namespace, name)
        try:
            await self.client.delete(path, {"propagationPolicy": "Background"})
        except ApiStatusError as err:
            if err.code == 404:
                return
            await self.recorder.emit(cronjob, "Warning", "FailedDelete", f"Deleted job: {err}")
            raise
        await self.recorder.emit(cronjob, "Normal", "SuccessfulDelete", f"Deleted job {name}")

    async def _write_status(self, cronjob: Obj, status: Obj) -> None:
        status = {k: v for k, v in status.items() if v not in (None, [], {})}
        if (cronjob.get("status") or {}) == status:
            return
        meta = cronjob["metadata"]
        path = resource_path("batch/v1", "cronjobs", meta.get("namespace"), meta["name"])
        await self.client.replace(path + "/status", {**cronjob, "status": status})
