"""The pods/eviction subresource, after pkg/registry/core/pod/storage/eviction.go.

POST /api/v1/namespaces/NS/pods/NAME/eviction with a policy/v1 (or v1beta1)
Eviction. In upstream's order:

1. the name in the body must match the URL; the Eviction's deleteOptions take
   the request's dryRun (`propagateDryRun`); validating admission runs on
   CREATE pods/eviction with the policy/v1 Eviction as object;
2. a pod that is Succeeded, Failed, Pending or already terminating is deleted
   without looking at budgets (`canIgnorePDB`), retrying conflicts;
3. otherwise more than one matching PodDisruptionBudget answers a 500 Status;
   an unready pod is deleted without spending budget when the policy allows
   (`unhealthyPodEvictionPolicy`); else `checkAndDecrement` either refuses
   (429 TooManyRequests with a DisruptionBudget cause) or writes the budget's
   status first: disruptionsAllowed - 1 and the pod in disruptedPods, so two
   concurrent evictions cannot both spend the last disruption;
4. `addConditionAndDeletePod`: the DisruptionTarget condition goes on the pod's
   status, then the pod is deleted with the Eviction's deleteOptions.

The answer is a Status Success with code 201. The budget's status write is a
loopback request upstream, so it goes through admission as system:apiserver.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from kubesim import jsoncodec
from kubesim.backoff import Backoff
from kubesim.types import Obj

from .auth import UserInfo
from .errors import ApiError, bad_request, conflict, forbidden, method_not_allowed
from .meta import rfc3339
from .resources import ResourceType
from .selectors import SelectorError, label_selector_from_object
from .server import AdmissionAttributes, ApiServer, RequestContext, json_response

T = TypeVar("T")

EVICTION_API_VERSIONS = ("policy/v1", "policy/v1beta1")
MAX_DISRUPTED_POD_SIZE = 2000
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
TOO_MANY_REQUESTS_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE_PDB_MESSAGE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
# The loopback identity kube-apiserver uses for its own requests.
APISERVER_USER = UserInfo("system:apiserver", ("system:authenticated", "system:masters"))


@dataclass(frozen=True, slots=True)
class EvictionRetry:
    """wait.Backoff with Factor 1: `steps` attempts, `duration` (+ up to `jitter` of it) apart."""

    steps: int = 20
    duration: float = 0.5
    jitter: float = 0.1

    def delays(self) -> Backoff:
        return Backoff(self.duration, factor=1.0, jitter=self.jitter)


EVICTIONS_RETRY = EvictionRetry()  # eviction.go EvictionsRetry


# pure policy


def can_ignore_pdb(pod: Obj) -> bool:
    # No phase yet reads as Pending, the phase upstream gives every new pod.
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    return phase in ("Succeeded", "Failed", "Pending") or bool(
        pod["metadata"].get("deletionTimestamp")
    )


def should_enforce_resource_version(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def is_pod_ready(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def resource_version_unset(options: Obj) -> bool:
    preconditions = options.get("preconditions") or {}
    return preconditions.get("resourceVersion") is None


def with_resource_version_precondition(options: Obj, resource_version: str) -> Obj:
    out = jsoncodec.copy(options)
    out["preconditions"] = {**(out.get("preconditions") or {}), "resourceVersion": resource_version}
    return out


def matching_pdbs(pdbs: list[Obj], pod: Obj) -> list[Obj]:
    """getPodDisruptionBudgets: an invalid selector matches nothing; `{}` matches all pods
    of the namespace (policy/v1), a null selector none."""
    labels = pod["metadata"].get("labels") or {}
    namespace = pod["metadata"].get("namespace")
    out = []
    for pdb in pdbs:
        if pdb["metadata"].get("namespace") != namespace:
            continue
        try:
            selector = label_selector_from_object((pdb.get("spec") or {}).get("selector"))
        except SelectorError:
            continue
        if selector.matches(labels):
            out.append(pdb)
    return out


def unhealthy_pod_may_go(pod: Obj, pdb: Obj) -> bool:
    """An unready pod is deleted without spending the budget when the policy says so."""
    if is_pod_ready(pod):
        return False
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    desired = int(status.get("desiredHealthy") or 0)
    return int(status.get("currentHealthy") or 0) >= desired and desired > 0


def too_many_requests(cause: str, retry_after: int) -> ApiError:
    details: Obj = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
    if retry_after > 0:
        details["retryAfterSeconds"] = retry_after
    return ApiError(429, TOO_MANY_REQUESTS_MESSAGE, "TooManyRequests", details)


def budget_still_processing(pdb_name: str) -> ApiError:
    """createTooManyRequestsError."""
    return too_many_requests(
        f"The disruption budget {pdb_name} is still being processed by the server.", 10
    )


def _pdb_forbidden(pdb_name: str, why: str) -> ApiError:
    return forbidden("policy", "poddisruptionbudget", pdb_name, why)


def check_and_decrement(pdb: Obj, pod_name: str, dry_run: bool, now: dt.datetime) -> Obj | None:
    """checkAndDecrement: the budget's new status to write, None when dry-run (nothing to
    write), or an ApiError when the eviction would violate the budget."""
    name = pdb["metadata"]["name"]
    status = pdb.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
        raise budget_still_processing(name)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise _pdb_forbidden(name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        raise _pdb_forbidden(
            name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if allowed == 0:
        raise too_many_requests(
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} "
            f"healthy pods and has {int(status.get('currentHealthy') or 0)} currently",
            0,
        )
    updated = jsoncodec.copy(pdb)
    new_status = updated.setdefault("status", {})
    new_status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        _set_insufficient_pods(new_status, now)
    if dry_run:
        return None
    disrupted = dict(new_status.get("disruptedPods") or {})
    disrupted[pod_name] = rfc3339(now)
    new_status["disruptedPods"] = disrupted
    return updated


def _set_insufficient_pods(status: Obj, now: dt.datetime) -> None:
    """pdbhelper.UpdateDisruptionAllowedCondition with 0 allowed (apimeta.SetStatusCondition)."""
    conditions = [dict(c) for c in status.get("conditions") or []]
    wanted = {"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
              "message": "", "observedGeneration": status.get("observedGeneration", 0)}  # fmt: skip
    for condition in conditions:
        if condition.get("type") == "DisruptionAllowed":
            if condition.get("status") != "False":
                condition["lastTransitionTime"] = rfc3339(now)
            condition.update(wanted)
            break
    else:
        conditions.append({**wanted, "lastTransitionTime": rfc3339(now)})
    status["conditions"] = conditions


def with_disruption_target(pod: Obj, now: dt.datetime) -> Obj:
    """podutil.UpdatePodCondition with the eviction API's DisruptionTarget condition."""
    updated = jsoncodec.copy(pod)
    status = updated.setdefault("status", {})
    conditions = [dict(c) for c in status.get("conditions") or []]
    condition: Obj = {"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                      "lastTransitionTime": rfc3339(now), "reason": "EvictionByEvictionAPI",
                      "message": "Eviction API: evicting"}  # fmt: skip
    for i, old in enumerate(conditions):
        if old.get("type") == "DisruptionTarget":
            if old.get("status") == condition["status"]:
                condition["lastTransitionTime"] = old.get("lastTransitionTime")
            conditions[i] = condition
            break
    else:
        conditions.append(condition)
    status["conditions"] = conditions
    return updated


def success_status() -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


# the handler


class EvictionHandler:
    def __init__(self, server: ApiServer, retry: EvictionRetry = EVICTIONS_RETRY) -> None:
        self.server = server
        self.registry = server.registry
        self.retry = retry
        pods = server.resources.by_kind("", "Pod")
        pdbs = server.resources.by_kind("policy", "PodDisruptionBudget")
        assert pods is not None and pdbs is not None
        self.pods: ResourceType = pods
        self.pdbs: ResourceType = pdbs

    def register(self) -> None:
        self.server.register_subresource("", "pods", "eviction", self.handle)

    def _now(self) -> dt.datetime:
        return self.registry.clock()

    async def handle(self, ctx: RequestContext) -> web.Response:
        if ctx.info.verb != "create":
            raise method_not_allowed()
        eviction = _decode_eviction(await ctx.json_body(), ctx.namespace)
        if eviction["metadata"].get("name") != ctx.info.name:
            raise bad_request("name in URL does not match name in Eviction object")
        delete_options = _propagate_dry_run(eviction, ctx.dry_run)
        create_options: Obj = {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        if ctx.dry_run:
            create_options["dryRun"] = ["All"]
        await self.server.admit(
            AdmissionAttributes(self.pods, "eviction", "CREATE", ctx.namespace, ctx.info.name,
                                jsoncodec.copy(eviction), None, create_options, ctx.dry_run,
                                ctx.user, "policy", "v1", "Eviction")
        )  # fmt: skip
        status = await self.evict(ctx.namespace, ctx.info.name, delete_options)
        return json_response(status, int(status["code"]))

    async def evict(self, namespace: str, name: str, options: Obj) -> Obj:
        """EvictionREST.Create after admission: the Status to answer, or raises ApiError."""
        dry_run = "All" in (options.get("dryRun") or [])
        rv_unset = resource_version_unset(options)
        pod: Obj = {}

        async def delete_if_pdb_can_be_ignored() -> bool:
            nonlocal pod
            pod = self.registry.get(self.pods, namespace, name)
            if not can_ignore_pdb(pod):
                return False
            delete_options = options
            if should_enforce_resource_version(pod) and rv_unset:
                delete_options = with_resource_version_precondition(
                    options, pod["metadata"]["resourceVersion"]
                )
            self._add_condition_and_delete(namespace, name, delete_options, dry_run)
            return True

        # A resourceVersion precondition from the client makes conflicts final.
        deleted = await self._retry(
            delete_if_pdb_can_be_ignored, lambda e: rv_unset and e.reason == "Conflict"
        )
        if deleted:
            return success_status()

        pdbs = matching_pdbs(self.registry.store.list(self.pdbs.storage_key, namespace), pod)
        if len(pdbs) > 1:
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": MORE_THAN_ONE_PDB_MESSAGE, "code": 500}  # fmt: skip
        update_deletion_options = False
        pdb_name = ""
        if pdbs:
            pdb_name = pdbs[0]["metadata"]["name"]
            if unhealthy_pod_may_go(pod, pdbs[0]):
                update_deletion_options = True
            else:
                await self._decrement(pdbs[0], name, dry_run)
        delete_options = options
        if update_deletion_options:
            # The pod must not have become ready since the budget was judged.
            delete_options = with_resource_version_precondition(
                options, pod["metadata"]["resourceVersion"]
            )
        try:
            self._add_condition_and_delete(namespace, name, delete_options, dry_run)
        except ApiError as err:
            if err.reason == "Conflict" and update_deletion_options and rv_unset:
                raise budget_still_processing(pdb_name) from None
            raise
        return success_status()

    async def _decrement(self, pdb: Obj, pod_name: str, dry_run: bool) -> None:
        namespace, pdb_name = pdb["metadata"]["namespace"], pdb["metadata"]["name"]
        current = pdb
        refresh = False

        async def attempt() -> None:
            nonlocal current, refresh
            if refresh:
                current = self.registry.get(self.pdbs, namespace, pdb_name)
            try:
                updated = check_and_decrement(current, pod_name, dry_run, self._now())
                if updated is not None:
                    await self._write_pdb_status(current, updated)
            except ApiError:
                refresh = True
                raise

        await self._retry(attempt, lambda e: e.reason == "Conflict")

    async def _write_pdb_status(self, current: Obj, updated: Obj) -> None:
        meta = current["metadata"]
        read, prepared = self.registry.prepare_update(
            self.pdbs, meta["namespace"], meta["name"], updated, "status"
        )
        await self.server.admit(
            AdmissionAttributes(self.pdbs, "status", "UPDATE", meta["namespace"], meta["name"],
                                prepared, read,
                                {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
                                False, APISERVER_USER)
        )  # fmt: skip
        self.registry.commit_update(self.pdbs, read, prepared)

    def _add_condition_and_delete(
        self, namespace: str, name: str, options: Obj, dry_run: bool
    ) -> None:
        """addConditionAndDeletePod (the PodDisruptionConditions gate is GA)."""
        if not dry_run:
            latest = self.registry.get(self.pods, namespace, name)
            _check_latest_pod(latest, options)
            read, prepared = self.registry.prepare_update(
                self.pods, namespace, name, with_disruption_target(latest, self._now()), "status"
            )
            updated = self.registry.commit_update(self.pods, read, prepared)
            if not resource_version_unset(options):
                # We made the pod's latest change: the precondition moves with it.
                options = with_resource_version_precondition(
                    options, updated["metadata"]["resourceVersion"]
                )
        self.registry.delete(self.pods, namespace, name, options, dry_run)

    async def _retry(
        self, attempt: Callable[[], Awaitable[T]], retriable: Callable[[ApiError], bool]
    ) -> T:
        """retry.OnError: on exhaustion, the last retriable error."""
        delays = self.retry.delays()
        for step in range(self.retry.steps):
            try:
                return await attempt()
            except ApiError as err:
                if not retriable(err) or step == self.retry.steps - 1:
                    raise
            await asyncio.sleep(delays.next_delay())
        raise AssertionError("EvictionRetry.steps must be at least 1")


def _check_latest_pod(pod: Obj, options: Obj) -> None:
    """The getLatestPod preconditions, with their own wording (resource "Pod")."""
    preconditions = options.get("preconditions") or {}
    meta = pod["metadata"]
    uid = preconditions.get("uid")
    if uid and uid != meta.get("uid"):
        raise conflict("", "Pod", meta["name"],
                       f"the UID in the precondition ({uid}) does not match the UID in record "
                       f"({meta.get('uid')}). The object might have been deleted and then "
                       "recreated")  # fmt: skip
    rv = preconditions.get("resourceVersion")
    if rv and rv != meta.get("resourceVersion"):
        raise conflict("", "Pod", meta["name"],
                       f"the ResourceVersion in the precondition ({rv}) does not match the "
                       f"ResourceVersion in record ({meta.get('resourceVersion')}). The object "
                       "might have been modified")  # fmt: skip


def _decode_eviction(body: Any, namespace: str) -> Obj:
    """Decode a policy/v1 or v1beta1 Eviction into the policy/v1 form admission sees."""
    if not isinstance(body, dict):
        raise bad_request("the body of the request was in an unknown format")
    eviction: Obj = jsoncodec.copy(body)
    api_version = eviction.get("apiVersion") or "policy/v1"
    kind = eviction.get("kind") or "Eviction"
    if api_version not in EVICTION_API_VERSIONS:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            "version (policy/v1)"
        )
    if kind != "Eviction":
        raise bad_request(f"the kind in the data ({kind}) does not match the expected kind "
                          "(Eviction)")  # fmt: skip
    eviction["apiVersion"], eviction["kind"] = "policy/v1", "Eviction"
    meta = eviction.get("metadata")
    if meta is None:
        meta = eviction["metadata"] = {}
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["namespace"] = namespace
    meta.setdefault("creationTimestamp", None)  # a zero metav1.Time encodes as null
    options = eviction.get("deleteOptions")
    if options is not None and not isinstance(options, dict):
        raise bad_request("deleteOptions must be an object")
    return eviction


def _propagate_dry_run(eviction: Obj, request_dry_run: bool) -> Obj:
    """propagateDryRun: the delete options to use; the Eviction takes the request's dryRun."""
    request_values = ["All"] if request_dry_run else []
    options = eviction.get("deleteOptions")
    if options is None:
        return {"dryRun": request_values} if request_values else {}
    body_values = list(options.get("dryRun") or [])
    if not body_values:
        if request_values:
            options["dryRun"] = request_values
        return jsoncodec.copy(options)
    if request_values and request_values != body_values:
        message = (
            "Non-matching dry-run options in request and content: "
            f"[{' '.join(request_values)}] and [{' '.join(body_values)}]"
        )
        raise ApiError(500, f"Internal error occurred: {message}", "InternalError",
                       {"causes": [{"message": message}]})  # fmt: skip
    return jsoncodec.copy(options)


__all__ = [
    "EVICTIONS_RETRY",
    "EvictionHandler",
    "EvictionRetry",
    "check_and_decrement",
    "matching_pdbs",
    "with_disruption_target",
]
