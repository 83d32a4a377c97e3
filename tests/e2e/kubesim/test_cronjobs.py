"""kubesim's CronJob controller end to end through the API, with the Job controller, the
scheduler and a simulated kubelet. A schedule's time is made to have passed by writing
`status.lastScheduleTime` through the status subresource (as the controller itself does):
the controller then starts the most recent missed run at once. Every wait is on a watch."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from kubesim.client import KubeClient, resource_path
from kubesim.cluster.cluster import Cluster
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
NS = "default"
SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def cronjob(name: str, run_for: str = "100ms", **spec: Any) -> Obj:
    spec.setdefault("schedule", "* * * * *")
    template = {"metadata": {"annotations": {"sim.kubesim.io/run-for": run_for}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"jobTemplate": {"metadata": {"labels": {"cron": name}},
                                     "spec": {"template": template}}, **spec}}  # fmt: skip


def stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def missed_runs(client: KubeClient, name: str, minutes: int) -> None:
    """Say the last run was `minutes` ago: the runs since are missed."""
    path = resource_path("batch/v1", "cronjobs", NS, name)
    last = dt.datetime.now(dt.UTC).replace(second=0) - dt.timedelta(minutes=minutes)
    await client.patch(path + "/status", {"status": {"lastScheduleTime": stamp(last)}})


def jobs_of(name: str, predicate: Callable[[list[Obj]], bool]) -> Callable[[list[Obj]], bool]:
    return lambda items: predicate([j for j in items if j["metadata"]["name"].startswith(name)])


def complete(job: Obj) -> bool:
    return any(c["type"] == "Complete" for c in (job.get("status") or {}).get("conditions") or [])


def half_an_hour_away() -> str:
    """An hourly schedule whose most recent time is 30 minutes from the current minute's:
    its Job's name (the scheduled minute) is not the one `* * * * *` gives next."""
    return f"{(dt.datetime.now(dt.UTC).minute + 30) % 60} * * * *"


async def every_minute(client: KubeClient, name: str, **spec: Any) -> None:
    path = resource_path("batch/v1", "cronjobs", NS, name)
    await client.patch(path, {"spec": {"schedule": "* * * * *", **spec}})
    await missed_runs(client, name, 2)


async def test_cronjobs_run_on_schedule_with_their_policies(sim: KubeSim) -> None:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="cronjob-test")
    cronjobs = resource_path("batch/v1", "cronjobs", NS)
    try:
        async with Cluster(sim, nodes=["node-a"]):
            body = cronjob("tick", successfulJobsHistoryLimit=1, schedule=half_an_hour_away())
            created = await client.create(cronjobs, body)
            assert created["spec"]["concurrencyPolicy"] == "Allow"
            assert created["spec"]["failedJobsHistoryLimit"] == 1
            # The most recent missed run starts at once; lastScheduleTime moves to it.
            await missed_runs(client, "tick", 90)
            items = await watch_until(client, "batch/v1", "jobs", "Job", NS,
                                      jobs_of("tick-", lambda js: len(js) == 1))  # fmt: skip
            [first] = [j for j in items if j["metadata"]["name"].startswith("tick-")]
            scheduled = dt.datetime.fromisoformat(first["metadata"]["annotations"][SCHEDULED])
            assert first["metadata"]["name"] == f"tick-{int(scheduled.timestamp()) // 60}"
            assert first["metadata"]["labels"]["cron"] == "tick"
            assert first["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
            now = dt.datetime.now(dt.UTC)
            assert now - dt.timedelta(minutes=60) <= scheduled <= now
            # Finished: out of the active list, lastSuccessfulTime set.
            [tick] = await watch_until(
                client, "batch/v1", "cronjobs", "CronJob", NS,
                lambda items: any(i["metadata"]["name"] == "tick" and "lastSuccessfulTime" in
                                  (i.get("status") or {}) for i in items),
            )  # fmt: skip
            assert "active" not in tick["status"]
            assert tick["status"]["lastScheduleTime"] == stamp(scheduled)
            # A second run: the history limit of 1 deletes the first Job.
            await every_minute(client, "tick")
            await watch_until(
                client, "batch/v1", "jobs", "Job", NS,
                jobs_of("tick-", lambda js: len(js) == 1 and js[0]["metadata"]["uid"]
                        != first["metadata"]["uid"] and complete(js[0])),
            )  # fmt: skip

            # Forbid: a run while one is active is skipped (JobAlreadyActive).
            body = cronjob("lock", "1h", concurrencyPolicy="Forbid", schedule=half_an_hour_away())
            await client.create(cronjobs, body)
            await missed_runs(client, "lock", 90)
            items = await watch_until(client, "batch/v1", "jobs", "Job", NS,
                                      jobs_of("lock-", lambda js: len(js) == 1))  # fmt: skip
            [running] = [j for j in items if j["metadata"]["name"].startswith("lock-")]
            await every_minute(client, "lock")
            events = await watch_until(
                client,
                "v1",
                "events",
                "Event",
                NS,
                lambda evs: any(e["reason"] == "JobAlreadyActive" for e in evs),
            )
            assert any(e["involvedObject"]["name"] == "lock" for e in events
                       if e["reason"] == "JobAlreadyActive")  # fmt: skip
            # Replace: the active run is deleted and a new one started.
            await client.patch(resource_path("batch/v1", "cronjobs", NS, "lock"),
                               {"spec": {"concurrencyPolicy": "Replace"}})  # fmt: skip
            await watch_until(
                client, "batch/v1", "jobs", "Job", NS,
                jobs_of("lock-", lambda js: [j["metadata"]["uid"] for j in js
                                             if not j["metadata"].get("deletionTimestamp")]
                        not in ([], [running["metadata"]["uid"]])),
            )  # fmt: skip
    finally:
        await client.close()


async def test_invalid_cronjobs_are_refused(sim: KubeSim) -> None:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="cronjob-test")
    cronjobs = resource_path("batch/v1", "cronjobs", NS)
    try:
        for spec, field, message in (
            ({"schedule": "61 * * * *"}, "spec.schedule",
             'Invalid value: "61 * * * *": end of range (61) above maximum (59): 61'),
            ({"schedule": "TZ=UTC * * * * *"}, "spec.schedule",
             'Invalid value: "TZ=UTC * * * * *": cannot use TZ or CRON_TZ in schedule, use '
             "timeZone field instead"),
            ({"timeZone": "Mars/Olympus"}, "spec.timeZone",
             'Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus'),
        ):  # fmt: skip
            body = cronjob("bad", **spec)
            with pytest.raises(Exception) as err:
                await client.create(cronjobs, body)
            status = getattr(err.value, "status", {})
            assert status.get("code") == 422
            causes = status["details"]["causes"]
            assert {"field": field, "message": message, "reason": "FieldValueInvalid"} in causes
    finally:
        await client.close()
