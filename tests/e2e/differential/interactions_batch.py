"""Interactions of a newcomer's everyday session (issue 40): Jobs that finish and the
conditions the Job controller writes, CronJobs (defaults, validation, a missed run started
by the CronJob controller), autoscaling/v1 beside v2, the `default/kubernetes` Service, and
the OpenAPI v3 schemas `kubectl explain` reads.

Where a behaviour needs a kubelet: the real control plane has kwok, whose stages
(`realcluster/kwok.yaml`) end a pod as kubesim's simulated kubelet does (`sim.kubesim.io/
run-for` and `exit-code`; a Job's pod without them exits 0 after a second). So a Job's
conditions and counters are compared as kube-controller-manager's Job controller writes them
from those pod phases; the pods' container statuses (kwok's templates, kubesim's kubelet)
and `kubectl logs` (kwok has no log endpoint) are not compared. What the API server answers
alone (CronJob defaults and validation, autoscaling/v1's conversion, the kubernetes Service's
ports, the schemas) is compared whole.

`interactions.py` appends `BATCH_INTERACTIONS` to its catalogue.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubesim.client import MERGE_PATCH, resource_path

from .interactions import (
    Api,
    Interaction,
    Kind,
    _crud,
    names_view,
    spec_view,
    status_only,
    until,
)
from .normalise import Json

RUN_FOR = "sim.kubesim.io/run-for"
EXIT_CODE = "sim.kubesim.io/exit-code"
SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def _pod_template(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}
    }
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return template


def _cronjob(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"tier": "a"}},
            "spec": {"schedule": "0 0 1 1 *", "suspend": True,
                     "jobTemplate": {"spec": {"template": _pod_template()}}}}  # fmt: skip


CRONJOB = Kind("batch/v1", "cronjobs", "CronJob", _cronjob, view=spec_view)


def job_status_view(body: Json) -> Json:
    """What the Job controller wrote: conditions (type, status, reason, message), counters,
    and which times are set."""
    if not isinstance(body, dict) or body.get("kind") == "Status":
        return body
    status = body.get("status") or {}
    return {
        "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                       for c in status.get("conditions") or []],
        "counters": {k: status.get(k) for k in ("active", "succeeded", "failed", "ready",
                                                "terminating", "uncountedTerminatedPods")},
        "times": sorted(k for k in ("startTime", "completionTime") if status.get(k)),
    }  # fmt: skip


def _job(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": _pod_template(annotations), **spec}}  # fmt: skip


def _finished(name: str, condition: str) -> Any:
    def check(jobs: list[dict[str, Any]]) -> bool:
        return any(
            j["metadata"]["name"] == name
            and any(c.get("type") == condition and c.get("status") == "True"
                    for c in (j.get("status") or {}).get("conditions") or [])
            for j in jobs
        )  # fmt: skip

    return check


async def _jobs_finish(api: Api) -> None:
    """A Job whose pod exits 0 by itself completes; one whose pods exit 3 fails past its
    backoffLimit. The interim conditions come first (SuccessCriteriaMet, FailureTarget)."""
    path = resource_path("batch/v1", "jobs", api.namespace)
    await api.call("create a job", "POST", path, _job("done", completions=2, parallelism=2),
                   view=spec_view)  # fmt: skip
    await api.call("create a failing job", "POST", path,
                   _job("fails", {RUN_FOR: "200ms", EXIT_CODE: "3"}, backoffLimit=1),
                   view=spec_view)  # fmt: skip
    await until(api, path, _finished("done", "Complete"))
    await until(api, path, _finished("fails", "Failed"))
    await api.call("the complete job", "GET", f"{path}/done", view=job_status_view)
    await api.call("the failed job", "GET", f"{path}/fails", view=job_status_view)
    await api.call("jobs", "GET", path, view=names_view)


async def _job_ttl(api: Api) -> None:
    """ttlSecondsAfterFinished: 0: the finished Job is deleted (the TTL-after-finished
    controller), its pods with it."""
    path = resource_path("batch/v1", "jobs", api.namespace)
    await api.call("create", "POST", path, _job("brief", ttlSecondsAfterFinished=0),
                   view=spec_view)  # fmt: skip
    await until(api, path, lambda jobs: not any(j["metadata"]["name"] == "brief" for j in jobs))
    await api.call("gone", "GET", f"{path}/brief")


async def _cronjob_specs(api: Api) -> None:
    """Defaults, and the schedule and time zone validation."""
    path = resource_path("batch/v1", "cronjobs", api.namespace)

    def cronjob(name: str, **spec: Any) -> dict[str, Any]:
        body = {"apiVersion": "batch/v1", "kind": "CronJob", **_cronjob(name)}
        body["spec"].update(spec)
        return body

    await api.call("descriptor and zone", "POST", path,
                   cronjob("hourly", schedule="@hourly", timeZone="Europe/Paris"),
                   view=spec_view)  # fmt: skip
    await api.call("out of range", "POST", path, cronjob("bad", schedule="61 * * * *"))
    await api.call("four fields", "POST", path, cronjob("four", schedule="* * * *"))
    await api.call("TZ in the schedule", "POST", path,
                   cronjob("tz", schedule="TZ=UTC 0 * * * *"))  # fmt: skip
    await api.call("unknown zone", "POST", path, cronjob("mars", timeZone="Mars/Olympus"))
    await api.call("no schedule", "POST", path, cronjob("none", schedule=""))
    await api.call("name too long", "POST", path, cronjob("n" * 53))
    await api.call("bad policy", "POST", path, cronjob("policy", concurrencyPolicy="Sometimes"))


def _made_job_view(body: Json) -> Json:
    if not isinstance(body, dict) or body.get("kind") == "Status":
        return body
    items = body.get("items") or []
    return [{
        "name_is_the_minute": j["metadata"]["name"].rsplit("-", 1)[-1].isdigit(),
        "annotated": SCHEDULED in (j["metadata"].get("annotations") or {}),
        "labels": j["metadata"].get("labels"),
        "owner": [(r.get("kind"), r.get("controller")) for r in
                  j["metadata"].get("ownerReferences") or []],
    } for j in items]  # fmt: skip


async def _cronjob_missed_run(api: Api) -> None:
    """A CronJob whose last run was two hours ago starts its most recent missed run at once
    (both controllers act on a status change at once), as a Job named after the minute."""
    path = resource_path("batch/v1", "cronjobs", api.namespace)
    body = {"apiVersion": "batch/v1", "kind": "CronJob", **_cronjob("late")}
    body["spec"].update(schedule="0 * * * *", suspend=False)
    body["spec"]["jobTemplate"]["metadata"] = {"labels": {"made-by": "late"}}
    body["spec"]["jobTemplate"]["spec"]["template"]["metadata"] = {"annotations": {RUN_FOR: "1h"}}
    await api.call("create", "POST", path, body, view=spec_view)
    last = dt.datetime.now(dt.UTC).replace(minute=0, second=0) - dt.timedelta(hours=2)
    await api.call("last run two hours ago", "PATCH", f"{path}/late/status",
                   {"status": {"lastScheduleTime": last.strftime("%Y-%m-%dT%H:%M:%SZ")}},
                   content_type=MERGE_PATCH, view=status_only)  # fmt: skip
    jobs = resource_path("batch/v1", "jobs", api.namespace)
    await until(api, jobs, lambda items: bool(items))
    await api.call("the job it made", "GET", jobs, view=_made_job_view)
    await until(api, path, lambda items: bool((items[0].get("status") or {}).get("active")))
    await api.call("its status", "GET", f"{path}/late", view=lambda b: sorted(
        (b.get("status") or {}) if isinstance(b, dict) else {}))  # fmt: skip


async def _hpa_v1(api: Api) -> None:
    """kubectl <= 1.32's `autoscale` writes autoscaling/v1; both versions read one object."""
    v1 = resource_path("autoscaling/v1", "horizontalpodautoscalers", api.namespace)
    v2 = resource_path("autoscaling/v2", "horizontalpodautoscalers", api.namespace)
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "absent"}
    for name, spec in (("cpu", {"targetCPUUtilizationPercentage": 60}), ("plain", {})):
        body = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": name},
                "spec": {"scaleTargetRef": ref, "maxReplicas": 3, **spec}}  # fmt: skip
        await api.call(f"create {name} through v1", "POST", v1, body, view=spec_view)
        await api.call(f"{name} through v2", "GET", f"{v2}/{name}", view=spec_view)
        await api.call(f"{name} through v1", "GET", f"{v1}/{name}", view=spec_view)
    await api.call("list through v1", "GET", v1, view=names_view)


async def _kubernetes_service(api: Api) -> None:
    """The API server's own Service in `default`, its Endpoints and EndpointSlice (the
    ports' targets are each server's own serving port)."""

    def ports_view(body: Json) -> Json:
        if not isinstance(body, dict) or body.get("kind") == "Status":
            return body
        spec = body.get("spec") or {}
        return {"labels": body["metadata"].get("labels"), "type": spec.get("type"),
                "ports": [{k: p.get(k) for k in ("name", "port", "protocol")}
                          for p in spec.get("ports") or []]}  # fmt: skip

    await api.call("service", "GET", resource_path("v1", "services", "default", "kubernetes"),
                   view=ports_view)  # fmt: skip
    # Its Endpoints and EndpointSlice are not compared: the real control plane runs
    # kube-apiserver with --endpoint-reconciler-type=none (realcluster/cluster.py), which
    # keeps none; kubesim keeps them as the default reconciler does.


async def _openapi_schemas(api: Api) -> None:
    """What `kubectl explain deployment.spec.strategy` walks: the Deployment schema found by
    its group-version-kind, then spec and strategy, each by its property names."""
    _, doc = await api.call("apps/v1", "GET", "/openapi/v3/apis/apps/v1", view=lambda _: "")
    schemas = (doc.get("components") or {}).get("schemas") or {}

    def resolve(prop: Json) -> Json:
        ref = prop.get("$ref") or ((prop.get("allOf") or [{}])[0]).get("$ref", "")
        return schemas.get(ref.rsplit("/", 1)[-1], {})

    gvk = {"group": "apps", "version": "v1", "kind": "Deployment"}
    deployment: dict[str, Any] = next((s for s in schemas.values()
                       if gvk in s.get("x-kubernetes-group-version-kind", [])), {})  # fmt: skip
    spec = resolve((deployment.get("properties") or {}).get("spec") or {})
    strategy = resolve((spec.get("properties") or {}).get("strategy") or {})
    api.note("deployment", sorted(deployment.get("properties") or {}))
    api.note("deployment spec", sorted(spec.get("properties") or {}))
    api.note("strategy", sorted(strategy.get("properties") or {}))


BATCH_INTERACTIONS: list[tuple[str, Interaction]] = [
    *_crud(CRONJOB),
    ("cronjobs: defaults and validation", _cronjob_specs),
    ("cronjobs: a missed run", _cronjob_missed_run),
    ("jobs: complete and failed (kwok's pod stages)", _jobs_finish),
    ("jobs: ttlSecondsAfterFinished", _job_ttl),
    ("horizontalpodautoscalers: autoscaling/v1", _hpa_v1),
    ("services: the kubernetes Service", _kubernetes_service),
    ("openapi: the schemas explain reads", _openapi_schemas),
]
