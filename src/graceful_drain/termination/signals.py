"""Read the four signals concurrently under one hard deadline, and hand back Evidence.

The collectors (docs/termination-detector.md, "What it reads"):

* **pod** — this pod by name, a quorum read (the classifier checks the UID);
* **events** — Events in the namespace with ``fieldSelector=involvedObject.uid=<uid>``
  (by name when the UID is unknown; the classifier then attributes none of them).
  Filtering by source and type is the pure layer's job;
* **node** — the node by name (``NODE_NAME``, else the pod's ``spec.nodeName``):
  conditions and taints.  A 403 is evidence, not an error (and then no drain verdict);
* **owner** — pod → controlling ReplicaSet → controlling Deployment and its
  ``graceful-drain.stonal.com/restarted-at`` marker (kube/owners.py reads the controller
  references).  When the pod itself cannot be read (force-deleted, forbidden, or another
  incarnation) the ReplicaSet is found from the pod's name instead
  (``kube.owners.replicaset_from_pod_name``).  A ReplicaSet name longer than 58
  characters was truncated in the pod name and cannot be recovered: not_found.

Every collector yields its snapshot or an :class:`Unavailable`; none raises.  They
share one :class:`Deadline`: whatever has not answered by then is cancelled and
reported as ``Unavailable(timeout)``.  Node and owner wait for the pod read only
when they need something from it, so a hanging pod GET costs them nothing extra.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NamedTuple, TypeVar

from graceful_drain.kube.owners import controller_name, replicaset_from_pod_name
from graceful_drain.kube.rawjson import as_str, get_path
from graceful_drain.termination.budget import Deadline, pod_grace_period_seconds
from graceful_drain.termination.evidence import (
    EventsSnapshot,
    Evidence,
    NodeSnapshot,
    OwnerRollout,
    PodSnapshot,
    Trigger,
    Unavailable,
    UnavailableReason,
)
from graceful_drain.termination.identity import PodIdentity
from graceful_drain.termination.reader import ClusterReader, ReadFailure, failure_of

# After the deadline, cancelled reads get this long to unwind (sockets closing); the
# caller's budget should leave room for it.
CANCEL_WAIT_SECONDS = 0.05

T = TypeVar("T")


class Collection(NamedTuple):
    """The evidence, and what the reads learned about the deadline itself."""

    evidence: Evidence
    pod_grace_period_seconds: int | None  # from this pod's object, when it was read
    budget_seconds: float  # the deadline the reads ran under, after any tightening
    timed_out: tuple[str, ...]  # signals cut by the deadline


class _PodRead(NamedTuple):
    raw: object | None
    failure: Unavailable | None

    def own(self, identity: PodIdentity) -> object | None:
        """The raw pod if it is this incarnation (or the UID is unknown), else None."""
        if self.raw is None:
            return None
        uid = as_str(get_path(self.raw, "metadata", "uid"))
        return self.raw if identity.uid is None or uid == identity.uid else None


def events_field_selector(identity: PodIdentity) -> str:
    if identity.uid is not None:
        return f"involvedObject.uid={identity.uid}"
    return f"involvedObject.kind=Pod,involvedObject.name={identity.name}"


async def collect_evidence(
    reader: ClusterReader,
    identity: PodIdentity,
    deadline: Deadline,
    *,
    trigger: Trigger = Trigger.SIGTERM,
    budget_for_pod: Callable[[object], float | None] | None = None,
) -> Collection:
    """Read every signal under ``deadline``; never raises, never outlives the deadline.

    ``budget_for_pod``, when given, maps this pod's raw object (once read, and only if it
    is this incarnation) to a budget, or None; the deadline is tightened to it at once.
    """
    pod_task = asyncio.create_task(_read_pod(reader, identity))
    collectors: dict[str, asyncio.Task[Any]] = {"pod": pod_task}
    if trigger is Trigger.SIGTERM:
        collectors["events"] = asyncio.create_task(_guard(_read_events, reader, identity))
        collectors["node"] = asyncio.create_task(_guard(_read_node, reader, identity, pod_task))
        collectors["owner"] = asyncio.create_task(_guard(_read_owner, reader, identity, pod_task))
    try:
        grace = await _wait_until(deadline, collectors, pod_task, identity, budget_for_pod)
    except BaseException:  # the caller was cancelled: leave no read behind
        for task in collectors.values():
            task.cancel()
        raise

    results: dict[str, Any] = {}
    timed_out: list[str] = []
    for name, task in collectors.items():
        if task.done() and not task.cancelled():
            results[name] = task.result()
        else:
            timed_out.append(name)
            results[name] = Unavailable(
                UnavailableReason.TIMEOUT,
                f"no answer within the {deadline.budget_seconds:.2f}s detection deadline",
            )
    pod_result = results["pod"]
    pod = _pod_snapshot(pod_result) if isinstance(pod_result, _PodRead) else pod_result
    skipped = Unavailable(UnavailableReason.ERROR, "not read: an after-restart report uses the pod")
    evidence = Evidence(
        pod_uid=identity.uid,
        pod=pod,
        events=results.get("events", skipped),
        node=results.get("node", skipped),
        owner=results.get("owner", skipped),
        trigger=trigger,
    )
    return Collection(evidence, grace, deadline.budget_seconds, tuple(timed_out))


async def _wait_until(
    deadline: Deadline,
    collectors: dict[str, asyncio.Task[Any]],
    pod_task: asyncio.Task[_PodRead],
    identity: PodIdentity,
    budget_for_pod: Callable[[object], float | None] | None,
) -> int | None:
    """Wait for the collectors until the deadline, tightening it once the pod is known."""
    pending: set[asyncio.Task[Any]] = set(collectors.values())
    grace: int | None = None
    grace_seen = False
    while pending:
        remaining = deadline.remaining()
        if remaining <= 0:
            break
        _, pending = await asyncio.wait(
            pending, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
        )
        if not grace_seen and pod_task.done() and not pod_task.cancelled():
            grace_seen = True
            own = pod_task.result().own(identity)
            grace = pod_grace_period_seconds(own)
            budget = None if own is None or budget_for_pod is None else budget_for_pod(own)
            if budget is not None:
                deadline.tighten(budget)
    if pending:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=CANCEL_WAIT_SECONDS)
    return grace


async def _guard(read: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T | Unavailable:
    """A collector's answer, or its failure as evidence; only cancellation escapes.

    The collector's coroutine is made here, so one cancelled before it ran leaves none
    behind un-awaited."""
    try:
        return await read(*args)
    except ReadFailure as failure:
        return failure.unavailable
    except Exception as error:
        return failure_of(error).unavailable


async def _read_pod(reader: ClusterReader, identity: PodIdentity) -> _PodRead:
    try:
        return _PodRead(await reader.get_pod(identity.namespace, identity.name), None)
    except Exception as error:
        return _PodRead(None, failure_of(error).unavailable)


def _pod_snapshot(read: _PodRead) -> PodSnapshot | Unavailable:
    if read.failure is not None:
        return read.failure
    return PodSnapshot.from_object(read.raw)


async def _read_events(
    reader: ClusterReader, identity: PodIdentity
) -> EventsSnapshot | Unavailable:
    raw = await reader.list_events(identity.namespace, events_field_selector(identity))
    return EventsSnapshot.from_object(raw)


async def _read_node(
    reader: ClusterReader, identity: PodIdentity, pod_task: Awaitable[_PodRead]
) -> NodeSnapshot | Unavailable:
    name = identity.node_name
    if name is None:
        pod = await asyncio.shield(pod_task)
        name = as_str(get_path(pod.own(identity), "spec", "nodeName"))
        if name is None:
            return Unavailable(
                UnavailableReason.NOT_FOUND,
                "node name unknown: NODE_NAME is not set and the pod object does not name it",
            )
    return NodeSnapshot.from_object(await reader.get_node(name))


async def _read_owner(
    reader: ClusterReader, identity: PodIdentity, pod_task: Awaitable[_PodRead]
) -> OwnerRollout | Unavailable:
    pod = await asyncio.shield(pod_task)
    own = pod.own(identity)
    if own is not None:
        replicaset = controller_name(own, "ReplicaSet")
        if replicaset is None:
            return OwnerRollout.no_deployment()
    else:
        replicaset = replicaset_from_pod_name(identity.name)
        if replicaset is None:
            why = pod.failure or Unavailable(UnavailableReason.NOT_FOUND, "another incarnation")
            return Unavailable(
                why.reason,
                "the pod object is not usable and its name is not a ReplicaSet pod name, "
                f"so its owner cannot be found ({why.detail or why.reason})",
            )
    try:
        raw_replicaset = await reader.get_replicaset(identity.namespace, replicaset)
    except ReadFailure as failure:
        if own is None and failure.unavailable.reason is UnavailableReason.NOT_FOUND:
            raise ReadFailure(
                UnavailableReason.NOT_FOUND,
                f"no ReplicaSet {replicaset!r}, the owner guessed from the pod name",
            ) from failure
        raise
    deployment = controller_name(raw_replicaset, "Deployment")
    if deployment is None:
        return OwnerRollout.no_deployment()
    return OwnerRollout.from_object(await reader.get_deployment(identity.namespace, deployment))
