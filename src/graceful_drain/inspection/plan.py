"""`graceful-drain plan NODE`, the pure part: what draining a node would do to each of its pods
right now, and the verdict (unprotected / blocked / N outages / safe).

The webhook's answer for each pod comes from `decide_eviction`, the very function the webhook
decides through, fed the cluster state the command read; everything else here is what happens
around that answer: kubectl drain's filters, PodDisruptionBudgets, and whether the workload
keeps a Ready pod elsewhere. When the webhook does not protect evictions (webhook_health:
the address the API server dials does not answer), its answer is not what the drain gets:
the API server's failurePolicy is, and the verdict says `unprotected` first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from graceful_drain.controller.decision.deadline import PodDeadline, pod_deadline, with_deadline
from graceful_drain.controller.decision.intstr import (
    ROLLING_UPDATE,
    scaled_value_from_int_or_percent,
)
from graceful_drain.controller.decision.ledger import gone_uids
from graceful_drain.controller.decision.lookups import (
    DeploymentFound,
    PodFound,
    ready_besides_among,
    ready_elsewhere_among,
    resolve_owner,
)
from graceful_drain.controller.decision.model import (
    DeploymentInfo,
    ObjectRef,
    PodInfo,
    ReplicaSetInfo,
)
from graceful_drain.controller.decision.reasons import Decision, Reason
from graceful_drain.controller.decision.request import EvictionRequest
from graceful_drain.controller.decision.table import DecisionConfig, decide_eviction
from graceful_drain.inspection.budgets import check_budget
from graceful_drain.inspection.kubectl_drain import kubectl_treatment
from graceful_drain.inspection.selectors import labels_of, selector_matches
from graceful_drain.inspection.webhook_health import WebhookHealth
from graceful_drain.kube.owners import controller_ref
from graceful_drain.kube.timefmt import format_rfc3339, parse_rfc3339

JsonDict = Mapping[str, Any]
PLAN_USERNAME = "graceful-drain plan"
WEBHOOK_UNPROTECTED = "webhook-unprotected"  # a PodPlan reason: the webhook cannot answer
DEFAULT_PROBE_PERIOD_SECONDS = 10  # corev1.Probe periodSeconds default


class Outcome(StrEnum):
    HELD = "held"  # graceful-drain answers 429 until a replacement is Ready
    EVICTED = "evicted"  # evicted (or deleted) at once
    BLOCKED = "blocked"  # a PodDisruptionBudget refuses it: the drain never completes alone
    IGNORED = "ignored"  # DaemonSet pod, left running
    SKIPPED = "skipped"  # mirror (static) pod


class Verdict(StrEnum):
    SAFE = "safe"
    OUTAGE = "outage"
    BLOCKED = "blocked"
    UNPROTECTED = "unprotected"  # the webhook does not answer: graceful-drain protects nothing


EXIT_CODES: Mapping[Verdict, int] = {
    Verdict.SAFE: 0, Verdict.OUTAGE: 1, Verdict.BLOCKED: 2, Verdict.UNPROTECTED: 4,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class WebhookScope:
    """The registered webhook on pods/eviction: which namespaces it is asked about."""

    namespace_selector: JsonDict | None

    def reviews(self, namespace: JsonDict | None) -> bool:
        labels = {} if namespace is None else labels_of(namespace)
        return selector_matches(self.namespace_selector, labels, empty_matches_all=True)


@dataclass(frozen=True, slots=True)
class NodeState:
    """What `plan` reads: the node's pods and what deciding on them needs."""

    node: str
    pods: Sequence[JsonDict]  # bound to the node
    neighbours: Sequence[JsonDict]  # every pod in the namespaces of `pods`
    replicasets: Sequence[JsonDict]
    deployments: Sequence[JsonDict]
    budgets: Sequence[JsonDict]
    namespaces: Mapping[str, JsonDict]
    webhook: WebhookScope | None  # None: no webhook configuration registered
    health: WebhookHealth  # whether the address the API server dials answers
    # The nodes that are not being drained (decision/draining.py), `node` never among them;
    # None: not read, every node but `node` is taken to stay.
    staying_nodes: frozenset[str] | None = None
    # The drain client's termination deadline on `node` (decision/deadline.py: Karpenter's
    # NodeClaim annotation), when one is known.
    node_deadline: datetime | None = None
    # GracefulDrainWriteDeferred events in the namespaces of `pods`: a Deployment the
    # controller cannot write for now, so its pods' evictions are held (write-deferred)
    write_events: Sequence[JsonDict] = ()


@dataclass(frozen=True, slots=True)
class PodPlan:
    namespace: str
    name: str
    workload: str  # "Deployment/web", "DaemonSet/agent", "Pod/scratch"
    ready: bool
    outcome: Outcome
    outage: bool  # the eviction leaves the workload without a Ready pod
    reason: str  # the decision reason, or daemonset / mirror-pod / not-reviewed
    message: str
    decision: Decision | None = None  # None when the webhook is not asked about this pod
    budget: str | None = None
    fix: tuple[str, ...] = ()  # the fields to change so graceful-drain can protect it
    kubectl_flags: tuple[str, ...] = ()
    expected_wait: timedelta | None = None
    expected_wait_source: str | None = None  # readiness-history | probe-settings
    deadline: PodDeadline | None = None  # a held pod's drain-client deadline (deadline.py)


@dataclass(frozen=True, slots=True)
class Plan:
    node: str
    generated_at: datetime
    webhook_registered: bool
    config: DecisionConfig
    pods: tuple[PodPlan, ...]
    webhook: WebhookHealth

    @property
    def outage_workloads(self) -> list[str]:
        seen: dict[str, None] = {}
        for pod in self.pods:
            if pod.outage:
                seen[f"{pod.namespace}/{pod.workload}"] = None
        return list(seen)

    @property
    def blocked(self) -> list[PodPlan]:
        return [pod for pod in self.pods if pod.outcome is Outcome.BLOCKED]

    @property
    def verdict(self) -> Verdict:
        if self.webhook.protection == "unprotected":
            return Verdict.UNPROTECTED
        if self.blocked:
            return Verdict.BLOCKED
        return Verdict.OUTAGE if self.outage_workloads else Verdict.SAFE

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def kubectl_flags(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(flag for pod in self.pods for flag in pod.kubectl_flags))


def eviction_request(pod: ObjectRef) -> EvictionRequest:
    """The AdmissionReview request a `kubectl drain` eviction of `pod` would carry."""
    return EvictionRequest(
        uid=PLAN_USERNAME, operation="CREATE", group="", version="v1", resource="pods",
        sub_resource="eviction", namespace=pod.namespace, name=pod.name, dry_run=False,
        username=PLAN_USERNAME,
    )  # fmt: skip


class _Lookups:
    def __init__(self, state: NodeState, config: DecisionConfig, now: datetime) -> None:
        self.now = now  # the evictions ledger's entries count as gone until their expiry
        self.replicasets = {
            (rs.namespace, rs.name): rs
            for rs in (ReplicaSetInfo.from_object(raw) for raw in state.replicasets)
        }
        self.neighbours = [PodInfo.from_object(raw) for raw in state.neighbours]
        self.node, self.staying = state.node, state.staying_nodes
        self.raw_deployments = {_key(raw): raw for raw in state.deployments}
        self.deployments = {
            key: DeploymentInfo.from_object(raw, enabled_annotation=config.enabled_annotation)
            for key, raw in self.raw_deployments.items()
        }

    def replicaset(self, namespace: str, name: str) -> ReplicaSetInfo | None:
        return self.replicasets.get((namespace, name))

    def deployment(self, namespace: str, name: str) -> DeploymentInfo | None:
        return self.deployments.get((namespace, name))

    def ready_besides(self, pod: PodInfo, deployment: DeploymentInfo) -> int:
        """As the webhook's `ClusterCache.ready_besides`, over the namespace's pods."""
        return ready_besides_among(pod, (
            other for other in self.neighbours
            if other.namespace == deployment.namespace
            and self._deployment_of(other) == deployment.ref
        ), gone_uids(deployment.evictions, self.now))  # fmt: skip

    def being_drained(self, node: str) -> bool:
        """The planned node is; another one is unless `staying_nodes` lists it."""
        return node == self.node or (self.staying is not None and node not in self.staying)

    def ready_elsewhere(self, pod: PodInfo, deployment: DeploymentInfo) -> int:
        """As the webhook's `ClusterCache.ready_elsewhere`, over the namespace's pods."""
        return ready_elsewhere_among(pod, (
            other for other in self.neighbours
            if other.namespace == deployment.namespace
            and self._deployment_of(other) == deployment.ref
        ), self.being_drained, gone_uids(deployment.evictions, self.now))  # fmt: skip

    def _deployment_of(self, pod: PodInfo) -> ObjectRef | None:
        found = resolve_owner(pod, self.replicaset, self.deployment)
        return found.deployment.ref if isinstance(found, DeploymentFound) else None

    def workload(self, pod: JsonDict) -> str:
        owner = controller_ref(pod)
        if owner is None:
            return f"Pod/{(pod.get('metadata') or {}).get('name', '')}"
        info = PodInfo.from_object(pod)
        if info.owner_replicaset is not None:
            replicaset = self.replicaset(info.namespace, info.owner_replicaset)
            if replicaset is not None and replicaset.owner_deployment is not None:
                return f"Deployment/{replicaset.owner_deployment}"
        return f"{owner.get('kind', '')}/{owner.get('name', '')}"


def _key(obj: JsonDict) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))


def _condition_time(pod: JsonDict, kind: str) -> datetime | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return parse_rfc3339(str(condition.get("lastTransitionTime") or ""))
    return None


def expected_wait(pod: JsonDict) -> tuple[timedelta | None, str | None]:
    """How long a replacement takes to become Ready: this pod's own creation-to-Ready time,
    else its readiness probe's initialDelaySeconds + periodSeconds."""
    created = parse_rfc3339(str((pod.get("metadata") or {}).get("creationTimestamp") or ""))
    ready_at = _condition_time(pod, "Ready")
    if created is not None and ready_at is not None and ready_at >= created:
        return ready_at - created, "readiness-history"
    for container in (pod.get("spec") or {}).get("containers") or []:
        probe = container.get("readinessProbe")
        if isinstance(probe, Mapping):
            delay = int(probe.get("initialDelaySeconds") or 0)
            period = int(probe.get("periodSeconds") or DEFAULT_PROBE_PERIOD_SECONDS)
            return timedelta(seconds=delay + period), "probe-settings"
    return None, None


def surge_fixes(deployment: JsonDict) -> tuple[str, ...]:
    """The spec fields keeping a one-replica Deployment from surging a Ready replacement, as
    advice next to the table's cannot-surge and cannot-protect answers (the table alone
    decides)."""
    spec = deployment.get("spec") or {}
    fixes: list[str] = []
    if spec.get("paused") is True:
        fixes.append("spec.paused: false")
    strategy = spec.get("strategy") or {}
    if (strategy.get("type") or ROLLING_UPDATE) != ROLLING_UPDATE:
        fixes.append(f"spec.strategy.type: {ROLLING_UPDATE} (is {strategy.get('type')})")
        return tuple(fixes)
    rolling = strategy.get("rollingUpdate") or {}
    surge = scaled_value_from_int_or_percent(rolling.get("maxSurge", "25%"), 1, round_up=True)
    if not surge or surge < 1:
        fixes.append(f"spec.strategy.rollingUpdate.maxSurge: 1 (is {rolling.get('maxSurge')})")
    unavailable = scaled_value_from_int_or_percent(
        rolling.get("maxUnavailable", "25%"), 1, round_up=False
    )
    if unavailable is not None and unavailable >= 1:
        fixes.append(
            f"spec.strategy.rollingUpdate.maxUnavailable: 0 (is {rolling.get('maxUnavailable')})"
        )
    return tuple(fixes)


def _serving_elsewhere(state: NodeState, lookups: _Lookups) -> frozenset[tuple[str, str]]:
    """(namespace, workload) of every workload with a Ready pod on another node."""
    return frozenset(
        (_key(other)[0], lookups.workload(other))
        for other in state.neighbours
        if (other.get("spec") or {}).get("nodeName") != state.node
        and not (other.get("metadata") or {}).get("deletionTimestamp")
        and PodInfo.from_object(other).ready
    )


def _budget_keeps_one(name: str | None, state: NodeState) -> bool:
    for budget in state.budgets:
        if name == "/".join(_key(budget)):
            return int((budget.get("status") or {}).get("desiredHealthy") or 0) >= 1
    return False


@dataclass(frozen=True)
class _Review:
    """What the webhook would answer for a pod, as far as `plan` can tell."""

    reason: str
    message: str
    decision: Decision | None = None
    blocks: bool = False  # the webhook does not answer and its failurePolicy is not Ignore


def _review(
    info: PodInfo, state: NodeState, lookups: _Lookups, config: DecisionConfig, now: datetime
) -> _Review:
    if state.webhook is None:
        return _Review("not-reviewed", "no graceful-drain webhook configuration is registered")
    if not state.webhook.reviews(state.namespaces.get(info.namespace)):
        return _Review(
            "not-reviewed",
            f"namespace {info.namespace} is outside the webhook's namespaceSelector",
        )
    if state.health.protection == "unprotected":
        return _Review(
            WEBHOOK_UNPROTECTED,
            f"the webhook does not answer ({state.health.detail}); {state.health.consequence}",
            blocks=state.health.failure_policy != "Ignore",
        )
    decision = decide_eviction(
        eviction_request(info.ref), PodFound(info), lookups.replicaset, lookups.deployment,
        config, now, ready_besides=lookups.ready_besides,
        ready_elsewhere=lookups.ready_elsewhere,
    )  # fmt: skip
    return _Review(decision.reason.value, decision.message, decision)


def _plan_held(
    pod: JsonDict,
    info: PodInfo,
    state: NodeState,
    base: dict[str, Any],
    held: Decision,
    config: DecisionConfig,
    now: datetime,
) -> PodPlan:
    """A pod whose eviction the webhook holds: with a drain client's deadline, whether a write
    failing for now holds it too, how long a replacement takes, and whether it is lost."""
    message = held.message
    deadline = pod_deadline(state.node, state.node_deadline, info.grace_seconds)
    if deadline is not None:
        held = with_deadline(held, deadline, now)
        base.update(decision=held, deadline=deadline)
        message = held.message
    failing = _write_deferred(state.write_events, held.deployment, now, config)
    if failing is not None:
        message = f"{message}; held meanwhile because {failing}"
    wait, source = expected_wait(pod)
    if wait is not None and held.waited is not None:
        wait = max(min(wait - held.waited, config.rollout_timeout - held.waited),
                   timedelta(0))  # fmt: skip
    # past the deadline, Karpenter deletes it before a replacement is Ready
    certain = deadline is not None and deadline.passed(now) and info.ready
    return PodPlan(**base, outcome=Outcome.HELD, outage=certain, message=message,
                   expected_wait=wait, expected_wait_source=source)  # fmt: skip


def _plan_pod(
    pod: JsonDict,
    state: NodeState,
    lookups: _Lookups,
    serving_elsewhere: frozenset[tuple[str, str]],
    config: DecisionConfig,
    now: datetime,
) -> PodPlan:
    info = PodInfo.from_object(pod)
    workload = lookups.workload(pod)
    base: dict[str, Any] = {"namespace": info.namespace, "name": info.name,
                            "workload": workload, "ready": info.ready}  # fmt: skip
    treatment = kubectl_treatment(pod)
    if treatment.category == "daemonset":
        return PodPlan(**base, outcome=Outcome.IGNORED, outage=False, reason="daemonset",
                       message=treatment.note, kubectl_flags=treatment.flags)  # fmt: skip
    if treatment.category == "mirror-pod":
        return PodPlan(**base, outcome=Outcome.SKIPPED, outage=False, reason="mirror-pod",
                       message=treatment.note)  # fmt: skip
    base["kubectl_flags"] = treatment.flags

    review = _review(info, state, lookups, config, now)
    decision, message = review.decision, review.message
    base.update(reason=review.reason, decision=decision)
    if review.blocks:
        return PodPlan(**base, outcome=Outcome.BLOCKED, outage=False, message=message)

    held = decision if decision is not None and not decision.allowed else None
    budget = check_budget(pod, info.ready, state.budgets, surge=held is not None)
    base["budget"] = budget.budget
    if budget.blocks:
        blocked = (
            f"PodDisruptionBudget {budget.budget} refuses the eviction ({budget.detail}); "
            "the drain will not complete without intervention"
        )
        return PodPlan(**base, outcome=Outcome.BLOCKED, outage=False, message=blocked)
    if held is not None:
        return _plan_held(pod, info, state, base, held, config, now)

    fix: tuple[str, ...] = ()
    if decision is not None and decision.reason in (Reason.CANNOT_SURGE, Reason.CANNOT_PROTECT):
        ref = decision.deployment
        raw = None if ref is None else lookups.raw_deployments.get((ref.namespace, ref.name))
        fix = () if raw is None else surge_fixes(raw)
    outage = (
        info.ready
        and not info.terminating  # already leaving: the drain changes nothing
        and treatment.category != "finished"
        and (info.namespace, workload) not in serving_elsewhere
        and not _budget_keeps_one(budget.budget, state)
    )
    if treatment.note:
        message = f"{message}; {treatment.note}"
    return PodPlan(**base, outcome=Outcome.EVICTED, outage=outage, message=message, fix=fix)


def _write_deferred(events: Sequence[JsonDict], deployment: ObjectRef | None, now: datetime,
                    config: DecisionConfig) -> str | None:  # fmt: skip
    """The newest GracefulDrainWriteDeferred said of `deployment` within --rollout-timeout (the
    longest such a hold lasts): the controller's write to it fails for now, and why."""
    if deployment is None:
        return None
    newest: tuple[datetime, str] | None = None
    for event in events:
        regarding = event.get("involvedObject") or {}
        if (regarding.get("namespace"), regarding.get("name")) != (
            deployment.namespace, deployment.name,
        ):  # fmt: skip
            continue
        seen = parse_rfc3339(str(event.get("lastTimestamp") or event.get("eventTime") or ""))
        if seen is None or now - seen > config.rollout_timeout:
            continue
        if newest is None or seen > newest[0]:
            newest = (seen, str(event.get("message") or ""))
    if newest is None:
        return None
    message = newest[1].removeprefix("graceful-drain: ")
    return f"{message} (GracefulDrainWriteDeferred, {format_rfc3339(newest[0])})"


def plan_node(state: NodeState, config: DecisionConfig, now: datetime) -> Plan:
    lookups = _Lookups(state, config, now)
    serving_elsewhere = _serving_elsewhere(state, lookups)
    pods = sorted(state.pods, key=_key)
    return Plan(
        node=state.node,
        generated_at=now,
        webhook_registered=state.webhook is not None,
        config=config,
        pods=tuple(_plan_pod(pod, state, lookups, serving_elsewhere, config, now) for pod in pods),
        webhook=state.health,
    )
