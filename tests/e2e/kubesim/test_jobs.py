"""Containers that finish, and kubesim's Job controller on them, end to end through the API
with the scheduler and simulated kubelets: a Job's pod without annotations exits 0 after a
short run, a pod's `sim.kubesim.io/run-for` and `exit-code` say how long it runs and how it
ends; a Job completes (`completions` reached, `parallelism` at a time), fails past its
`backoffLimit`, and is deleted `ttlSecondsAfterFinished` after it finished. The conditions
are kube-controller-manager 1.31+'s: SuccessCriteriaMet then Complete, FailureTarget then
Failed. Every wait is on a watch."""

from __future__ import annotations

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
RUN_FOR = "sim.kubesim.io/run-for"
EXIT_CODE = "sim.kubesim.io/exit-code"


def job(name: str, annotations: Obj | None = None, **spec: Any) -> Obj:
    template: Obj = {
        "metadata": {"annotations": annotations or {}},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox", "args": ["echo", name]}]},
    }  # fmt: skip
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": template, **spec}}  # fmt: skip


def condition_types(obj: Obj) -> list[str]:
    return [c["type"] for c in (obj.get("status") or {}).get("conditions") or []]


def named(name: str, predicate: Callable[[Obj], bool]) -> Callable[[list[Obj]], bool]:
    return lambda items: any(i["metadata"]["name"] == name and predicate(i) for i in items)


async def job_until(client: KubeClient, name: str, predicate: Callable[[Obj], bool]) -> Obj:
    items = await watch_until(client, "batch/v1", "jobs", "Job", NS, named(name, predicate))
    return next(i for i in items if i["metadata"]["name"] == name)


async def test_jobs_complete_fail_and_expire(sim: KubeSim) -> None:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="jobs-test")
    try:
        async with Cluster(sim, nodes=["node-a"]):
            jobs = resource_path("batch/v1", "jobs", NS)
            await client.create(jobs, job("three", completions=3, parallelism=2))
            await client.create(
                jobs, job("failing", {RUN_FOR: "100ms", EXIT_CODE: "3"}, backoffLimit=1)
            )
            await client.create(jobs, job("brief", ttlSecondsAfterFinished=0))

            three = await job_until(client, "three", lambda j: "Complete" in condition_types(j))
            status = three["status"]
            assert condition_types(three) == ["SuccessCriteriaMet", "Complete"]
            assert {(c["reason"], c["message"]) for c in status["conditions"]} == {
                ("CompletionsReached", "Reached expected number of succeeded pods")
            }
            assert status["succeeded"] == 3 and "failed" not in status
            assert "active" not in status and status["ready"] == 0
            assert status["completionTime"] == status["conditions"][1]["lastTransitionTime"]

            failing = await job_until(client, "failing", lambda j: "Failed" in condition_types(j))
            assert condition_types(failing) == ["FailureTarget", "Failed"]
            assert {(c["reason"], c["message"]) for c in failing["status"]["conditions"]} == {
                ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
            }
            assert failing["status"]["failed"] == 2 and "completionTime" not in failing["status"]

            # ttlSecondsAfterFinished: 0, deleted once it finished (its pods with it).
            await watch_until(
                client, "batch/v1", "jobs", "Job", NS,
                lambda items: all(i["metadata"]["name"] != "brief" for i in items),
            )  # fmt: skip

            pods = await client.get(resource_path("v1", "pods", NS))
            of = {p["metadata"]["name"].rsplit("-", 1)[0]: p for p in pods["items"]}
            done = of["three"]["status"]
            assert done["phase"] == "Succeeded"
            assert done["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
            assert of["three"]["metadata"].get("finalizers") is None
            failed = of["failing"]["status"]
            assert failed["phase"] == "Failed"
            terminated = failed["containerStatuses"][0]["state"]["terminated"]
            assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
            assert "brief" not in of

            events = await client.get(resource_path("v1", "events", NS))
            reasons = {
                (e["involvedObject"]["name"], e["type"], e["reason"])
                for e in events["items"]
                if e["involvedObject"]["kind"] == "Job"
            }
            assert ("three", "Normal", "Completed") in reasons
            assert ("failing", "Warning", "BackoffLimitExceeded") in reasons
    finally:
        await client.close()


async def test_a_pod_that_finishes_restarts_under_its_restart_policy(sim: KubeSim) -> None:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="jobs-test")
    try:
        async with Cluster(sim, nodes=["node-a"]):
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "again", "annotations": {RUN_FOR: "50ms"}},
                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip
            await client.create(resource_path("v1", "pods", NS), pod)

            def restarted(p: Obj) -> bool:
                statuses = (p.get("status") or {}).get("containerStatuses") or []
                return bool(statuses) and statuses[0].get("restartCount", 0) >= 1

            items = await watch_until(client, "v1", "pods", "Pod", NS, named("again", restarted))
            [again] = items
            last = again["status"]["containerStatuses"][0]["lastState"]["terminated"]
            assert (last["exitCode"], last["reason"]) == (0, "Completed")
            assert again["status"]["phase"] == "Running"
    finally:
        await client.close()


async def test_a_suspended_job_runs_once_resumed(sim: KubeSim) -> None:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="jobs-test")
    try:
        async with Cluster(sim, nodes=["node-a"]):
            jobs = resource_path("batch/v1", "jobs", NS)
            await client.create(jobs, job("later", suspend=True))
            later = await job_until(client, "later", lambda j: "Suspended" in condition_types(j))
            [suspended] = later["status"]["conditions"]
            assert (suspended["status"], suspended["reason"]) == ("True", "JobSuspended")
            assert "startTime" not in later["status"] and "active" not in later["status"]
            await client.patch(f"{jobs}/later", {"spec": {"suspend": False}})
            done = await job_until(client, "later", lambda j: "Complete" in condition_types(j))
            resumed = done["status"]["conditions"][0]
            assert (resumed["type"], resumed["status"], resumed["reason"]) == (
                "Suspended", "False", "JobResumed",
            )  # fmt: skip
            assert done["status"]["succeeded"] == 1 and "startTime" in done["status"]
    finally:
        await client.close()
