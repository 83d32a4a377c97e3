"""Deadlines a drain client will enforce whatever graceful-drain answers: the one definition.

Karpenter (sigs.k8s.io/karpenter v1, checked on v1.8.2) enforces a NodePool's
`terminationGracePeriod`. When a NodeClaim that carries one is deleted, its lifecycle
controller writes the annotation `karpenter.sh/nodeclaim-termination-timestamp` on the
NodeClaim (not the Node), `deletionTimestamp + spec.terminationGracePeriod` formatted with
Go's `time.RFC3339` (pkg/controllers/nodeclaim/lifecycle/controller.go); its node health
controller writes the current time there to force a repair. The node termination controller
reads it back with `time.Parse(time.RFC3339, ...)` and, while it drains, deletes each pod
still on the node (no eviction, so no webhook is asked and no PDB counts) once the deadline
less the pod's own `terminationGracePeriodSeconds` has passed
(pkg/controllers/node/termination/terminator/terminator.go, `podDeleteTimeWithGracePeriod`).
The NodeClaim names its Node in `status.nodeName`.

What graceful-drain can and cannot know (docs/decisions.md, "Deadlines the drain client will
enforce"): the moment Karpenter deletes a held pod is exact; whether a Ready replacement
exists by then is not (the replacement's start and readiness are the workload's business).
A held pod's replacement is not Ready now (otherwise the eviction would be allowed), so:

- the pod's deadline has passed: Karpenter deletes it at its next reconcile, before a
  replacement is Ready: the Deployment *will* have no Ready pod until one is;
- the deadline is ahead: the Deployment *may* have no Ready pod, if none is Ready by then.

An annotation that is not strict RFC 3339 is ignored (Karpenter fails on it too): nothing is
claimed from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from graceful_drain.controller.decision.reasons import Decision
from graceful_drain.kube.timefmt import format_go_duration, format_rfc3339, parse_rfc3339

KARPENTER_TERMINATION_ANNOTATION = "karpenter.sh/nodeclaim-termination-timestamp"
KARPENTER_NODECLAIMS = ("karpenter.sh", "v1", "nodeclaims")  # group, version, plural
_EARLIEST = datetime.min.replace(tzinfo=UTC)


def parse_termination_timestamp(value: object) -> datetime | None:
    """The annotation's instant (aware UTC), or None when it is absent or not strict RFC 3339
    (what `time.Parse(time.RFC3339, ...)` refuses, Karpenter refuses too). Never raises."""
    return parse_rfc3339(value)


@dataclass(frozen=True, slots=True)
class NodeClaimInfo:
    """A NodeClaim as the controller keeps it: its Node and the termination deadline."""

    name: str
    node_name: str  # status.nodeName; "" until the node registered
    terminates_at: datetime | None  # KARPENTER_TERMINATION_ANNOTATION, parsed

    @classmethod
    def from_object(cls, raw: Mapping[str, Any]) -> Self:
        metadata = _mapping(raw.get("metadata"))
        status = _mapping(raw.get("status"))
        annotations = _mapping(metadata.get("annotations"))
        name, node = metadata.get("name"), status.get("nodeName")
        return cls(
            name=name if isinstance(name, str) else "",
            node_name=node if isinstance(node, str) else "",
            terminates_at=parse_termination_timestamp(
                annotations.get(KARPENTER_TERMINATION_ANNOTATION)
            ),
        )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class PodDeadline:
    """When Karpenter deletes one pod on a node whose NodeClaim carries a deadline."""

    node: str
    node_deadline: datetime  # the NodeClaim's termination timestamp
    grace_seconds: int | None  # the pod's terminationGracePeriodSeconds; None: unknown

    @property
    def delete_at(self) -> datetime:
        """The deadline less the pod's grace period: when Karpenter deletes it. With the grace
        period unknown, the node's deadline itself: the latest it can be."""
        try:
            return self.node_deadline - timedelta(seconds=self.grace_seconds or 0)
        except OverflowError:  # a grace period reaching before year 1: long passed
            return _EARLIEST

    def left(self, now: datetime) -> timedelta:
        """Time until the delete (zero once it has passed)."""
        return max(self.delete_at - now, timedelta(0))

    def passed(self, now: datetime) -> bool:
        return self.delete_at <= now

    def outage(self, now: datetime) -> str:
        """ "will" once the deadline has passed (the held pod's replacement is not Ready now),
        "may" before it (whether one is Ready by then is not knowable)."""
        return "will" if self.passed(now) else "may"

    def sentence(self, now: datetime, deployment: str) -> str:
        """What the 429 message, the Warning Event, `plan` and `status` say (bounded: names
        and two timestamps)."""
        source = (
            f"node {self.node}'s Karpenter terminationGracePeriod ends at "
            f"{format_rfc3339(self.node_deadline)}"
        )
        if self.grace_seconds is None:
            when = f"by {format_rfc3339(self.delete_at)} at the latest"
        else:
            source += f", less the pod's {self.grace_seconds}s grace period"
            when = f"at {format_rfc3339(self.delete_at)}"
        if self.passed(now):
            return (
                f"Karpenter's deadline for this pod passed ({source}): Karpenter deletes it "
                f"without its eviction before a replacement is Ready, so Deployment {deployment} "
                "will have no Ready pod until one is: expect an outage"
            )
        left = format_go_duration(timedelta(seconds=int(self.left(now).total_seconds())))
        return (
            f"Karpenter deletes this pod {when} (in {left}; {source}), Ready replacement or "
            f"not: if none is Ready by then, Deployment {deployment} may have no Ready pod "
            "until one is"
        )


def with_deadline(decision: Decision, deadline: PodDeadline, now: datetime) -> Decision:
    """`decision` whose message also names the drain client's deadline for the pod (the 429
    the webhook answers, and what `plan` and `status` say it answers)."""
    if decision.deployment is None:
        return decision
    deployment = f"{decision.deployment.namespace}/{decision.deployment.name}"
    base = decision

    def message() -> str:
        return f"{base.message}. {deadline.sentence(now, deployment)}"

    return Decision(decision.allowed, decision.reason, message, decision.deployment,
                    decision.waited, decision.stamp)  # fmt: skip


def deadline_json(deadline: PodDeadline | None, now: datetime) -> dict[str, object] | None:
    """The `terminationDeadline` field of `plan --json` and `status --json` (docs/cli.md)."""
    if deadline is None:
        return None
    return {
        "source": KARPENTER_TERMINATION_ANNOTATION,
        "node": deadline.node,
        "nodeDeadline": format_rfc3339(deadline.node_deadline),
        "podGraceSeconds": deadline.grace_seconds,
        "deleteAt": format_rfc3339(deadline.delete_at),
        "secondsLeft": deadline.left(now).total_seconds(),
        "outage": deadline.outage(now),
    }


def pod_deadline(
    node: str, node_deadline: datetime | None, grace_seconds: int | None
) -> PodDeadline | None:
    """The pod's deadline on `node`, or None when the node carries none."""
    if not node or node_deadline is None:
        return None
    return PodDeadline(node, node_deadline, grace_seconds)


def deadlines_by_node(claims: object) -> dict[str, datetime]:
    """Node name -> termination deadline, from raw NodeClaims (a list read by `plan` and
    `status`; anything else, or a claim without a node or a valid deadline, is skipped).
    Two claims on one node (never, but raw data): the earlier deadline."""
    found: dict[str, datetime] = {}
    for raw in claims if isinstance(claims, list) else ():
        if not isinstance(raw, Mapping):
            continue
        claim = NodeClaimInfo.from_object(raw)
        if claim.node_name and claim.terminates_at is not None:
            known = found.get(claim.node_name)
            if known is None or claim.terminates_at < known:
                found[claim.node_name] = claim.terminates_at
    return found
