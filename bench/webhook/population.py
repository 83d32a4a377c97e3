"""The cluster the webhook benchmark decides against, and the eviction requests it sends.

`plan(spec)` lays out Deployments across namespaces so that every decision reason the cache
can answer has pods to evict; the raw objects are generated lazily from the plan (50,000 raw pods
held at once would dwarf the cache being measured). `request_mix(spec, plans)` picks, for each
reason, a handful of pods and builds the AdmissionReview the API server would send for evicting
them, with the answer the webhook must give.

POD_GONE and CACHE_COLD need a live GET (the pod is not in the cache), whose cost is the API
server's: they are left out of the mix. ROLLOUT_REQUESTED stamps the Deployment through a
patcher that returns at once (see servers.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from bench import objects
from bench.objects import JsonObject
from graceful_drain.controller.decision.reasons import DENYING_REASONS, Reason
from graceful_drain.kube.timefmt import format_rfc3339

ENABLED_ANNOTATION = "graceful-drain.stonal.com/enabled"
ROLLOUT_TIMEOUT = timedelta(minutes=10)


class Variant(StrEnum):
    """What a Deployment looks like, named after the reason its pods' evictions end on."""

    PROTECTED = "protected"  # rollout-requested: stamp restarted-at, 429
    IN_PROGRESS = "in-progress"  # rollout-in-progress: restarted-at a minute ago, 429
    TIMED_OUT = "timed-out"  # rollout-timeout: restarted-at older than the rollout timeout
    SURGE_READY = "surge-ready"  # readyReplicas 2, the old pod and its Ready replacement
    POD_NOT_READY = "pod-not-ready"
    RECREATE = "recreate"  # cannot-surge
    NOT_ENABLED = "not-enabled"  # lacks the enabled annotation
    DELETING = "deleting"  # deployment-deleting
    MULTI = "multi"  # replicas-not-one (a PDB's business); some pods terminating


SINGLE_REPLICA_VARIANTS = tuple(v for v in Variant if v is not Variant.MULTI)


@dataclass(frozen=True, slots=True)
class PopulationSpec:
    deployments: int = 10_000
    pods: int = 50_000
    namespaces: int = 100
    single_replica_share: float = 0.6  # of Deployments
    bare_pod_share: float = 0.01  # of pods
    terminating_every: int = 10  # every n-th pod of a multi-replica Deployment is terminating
    samples_per_reason: int = 64  # distinct pods targeted per reason


@dataclass(frozen=True, slots=True)
class DeploymentPlan:
    index: int
    namespace: str
    name: str
    variant: Variant
    # pods in the cache; spec.replicas too, except for MULTI (at least 2) and SURGE_READY (1)
    pods: int

    @property
    def replicaset(self) -> str:
        return f"{self.name}-7f9c8d6b5"

    @property
    def replicas(self) -> int:
        return max(self.pods, 2) if self.variant is Variant.MULTI else 1

    def pod_name(self, ordinal: int) -> str:
        return f"{self.replicaset}-{ordinal:05d}"


@dataclass(frozen=True, slots=True)
class Layout:
    deployments: tuple[DeploymentPlan, ...]
    bare_pods: int
    namespaces: tuple[str, ...]

    @property
    def pod_count(self) -> int:
        return sum(plan.pods for plan in self.deployments) + self.bare_pods


def namespace_name(index: int) -> str:
    return f"team-{index:03d}"


def plan(spec: PopulationSpec) -> Layout:
    """Deployments (single-replica variants in turn, then multi-replica ones) and bare pods,
    adding up to exactly spec.deployments and spec.pods."""
    single = max(len(SINGLE_REPLICA_VARIANTS), round(spec.deployments * spec.single_replica_share))
    multi = spec.deployments - single
    bare = max(1, round(spec.pods * spec.bare_pod_share))
    single_pods = [_single_replica_pods(_single_variant(index)) for index in range(single)]
    multi_pods = spec.pods - sum(single_pods) - bare
    if multi < 1 or multi_pods < multi:
        raise ValueError(f"{spec} leaves too few pods or Deployments for every decision reason")
    namespaces = tuple(namespace_name(i) for i in range(spec.namespaces))
    plans: list[DeploymentPlan] = []
    for index in range(spec.deployments):
        variant: Variant
        if index < single:
            variant = _single_variant(index)
            pods = single_pods[index]
        else:
            variant = Variant.MULTI
            ordinal = index - single
            pods = multi_pods // multi + (1 if ordinal < multi_pods % multi else 0)
        plans.append(
            DeploymentPlan(
                index=index,
                namespace=namespaces[index % len(namespaces)],
                name=f"app-{index:05d}",
                variant=variant,
                pods=pods,
            )
        )
    return Layout(tuple(plans), bare, namespaces)


def _single_variant(index: int) -> Variant:
    return SINGLE_REPLICA_VARIANTS[index % len(SINGLE_REPLICA_VARIANTS)]


def _single_replica_pods(variant: Variant) -> int:
    """One pod; two while a surge rollout has its replacement Ready beside the old pod."""
    return 2 if variant is Variant.SURGE_READY else 1


# --- raw objects --------------------------------------------------------------------------------


def raw_deployment(item: DeploymentPlan, now: datetime) -> JsonObject:
    variant = item.variant
    restarted_at = None
    if variant is Variant.IN_PROGRESS:
        restarted_at = format_rfc3339(now - timedelta(minutes=1))
    elif variant is Variant.TIMED_OUT:
        restarted_at = format_rfc3339(now - ROLLOUT_TIMEOUT - timedelta(minutes=5))
    annotations = {} if variant is Variant.NOT_ENABLED else {ENABLED_ANNOTATION: "true"}
    return objects.deployment(
        item.index,
        namespace=item.namespace,
        name=item.name,
        replicas=item.replicas,
        ready_replicas=2 if variant is Variant.SURGE_READY else None,
        strategy="Recreate" if variant is Variant.RECREATE else "RollingUpdate",
        restarted_at=restarted_at,
        annotations=annotations,
        deleting=variant is Variant.DELETING,
    )


def raw_deployments(layout: Layout, now: datetime) -> Iterator[JsonObject]:
    for item in layout.deployments:
        yield raw_deployment(item, now)


def raw_replicasets(layout: Layout) -> Iterator[JsonObject]:
    for item in layout.deployments:
        yield objects.replicaset(
            item.index,
            namespace=item.namespace,
            name=item.replicaset,
            deployment=item.name,
            replicas=item.replicas,
        )


def is_terminating(item: DeploymentPlan, ordinal: int, every: int) -> bool:
    return item.variant is Variant.MULTI and ordinal % every == every - 1


def bare_pod_name(ordinal: int) -> str:
    return f"debug-{ordinal:05d}"


def raw_pods(layout: Layout, spec: PopulationSpec) -> Iterator[JsonObject]:
    index = 0
    for item in layout.deployments:
        for ordinal in range(item.pods):
            yield objects.pod(
                index,
                namespace=item.namespace,
                name=item.pod_name(ordinal),
                replicaset=item.replicaset,
                ready=item.variant is not Variant.POD_NOT_READY,
                terminating=is_terminating(item, ordinal, spec.terminating_every),
            )
            index += 1
    for ordinal in range(layout.bare_pods):
        namespace = layout.namespaces[ordinal % len(layout.namespaces)]
        yield objects.pod(index, namespace=namespace, name=bare_pod_name(ordinal), replicaset=None)
        index += 1


# --- the requests -------------------------------------------------------------------------------


class Shape(StrEnum):
    """How a request differs from a plain eviction of the target pod."""

    PLAIN = "plain"
    DRY_RUN = "dry-run"
    NOT_EVICTION = "not-eviction"  # a DELETE of the pod, sent to the same path
    UID_MISMATCH = "uid-mismatch"
    MALFORMED = "malformed"  # not an AdmissionReview v1


@dataclass(frozen=True, slots=True)
class RequestCase:
    reason: Reason  # the webhook's expected decision
    namespace: str
    pod: str
    shape: Shape
    uid: str  # the AdmissionReview request uid the answer must echo

    @property
    def allowed(self) -> bool:
        return self.reason not in DENYING_REASONS


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    case: RequestCase
    body: bytes


def _pods_of(layout: Layout, variant: Variant, spec: PopulationSpec,
             terminating: bool | None) -> Iterator[tuple[str, str]]:  # fmt: skip
    for item in layout.deployments:
        if item.variant is not variant:
            continue
        for ordinal in range(item.pods):
            if terminating is None or terminating == is_terminating(
                item, ordinal, spec.terminating_every
            ):
                yield item.namespace, item.pod_name(ordinal)


def _take(source: Iterator[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    taken = []
    for pair in source:
        taken.append(pair)
        if len(taken) == count:
            break
    return taken


def request_mix(spec: PopulationSpec, layout: Layout) -> list[RequestCase]:
    """Up to spec.samples_per_reason requests for each reason the cache answers, in turn."""
    count = spec.samples_per_reason
    protected = _take(_pods_of(layout, Variant.PROTECTED, spec, None), count)

    def of(variant: Variant, terminating: bool | None = None) -> list[tuple[str, str]]:
        return _take(_pods_of(layout, variant, spec, terminating), count)

    bare = [(layout.namespaces[i % len(layout.namespaces)], bare_pod_name(i))
            for i in range(min(count, layout.bare_pods))]  # fmt: skip
    by_reason: list[tuple[Reason, Shape, list[tuple[str, str]]]] = [
        (Reason.DRY_RUN, Shape.DRY_RUN, protected),
        (Reason.NOT_EVICTION, Shape.NOT_EVICTION, protected),
        (Reason.POD_TERMINATING, Shape.PLAIN, of(Variant.MULTI, terminating=True)),
        (Reason.UID_MISMATCH, Shape.UID_MISMATCH, protected),
        (Reason.NO_DEPLOYMENT, Shape.PLAIN, bare),
        (Reason.DEPLOYMENT_DELETING, Shape.PLAIN, of(Variant.DELETING)),
        (Reason.NOT_ENABLED, Shape.PLAIN, of(Variant.NOT_ENABLED)),
        (Reason.REPLICAS_NOT_ONE, Shape.PLAIN, of(Variant.MULTI, terminating=False)),
        (Reason.CANNOT_SURGE, Shape.PLAIN, of(Variant.RECREATE)),
        (Reason.POD_NOT_READY, Shape.PLAIN, of(Variant.POD_NOT_READY)),
        (Reason.SURGE_READY, Shape.PLAIN, of(Variant.SURGE_READY)),
        (Reason.ROLLOUT_TIMEOUT, Shape.PLAIN, of(Variant.TIMED_OUT)),
        (Reason.ROLLOUT_IN_PROGRESS, Shape.PLAIN, of(Variant.IN_PROGRESS)),
        (Reason.ROLLOUT_REQUESTED, Shape.PLAIN, protected),
        (Reason.MALFORMED_REVIEW, Shape.MALFORMED, protected[:1]),
    ]
    cases: list[RequestCase] = []
    for group, (reason, shape, targets) in enumerate(by_reason):
        for namespace, pod in targets:
            uid = f"4f6d2a10-bench-{group:02d}{len(cases):06d}"
            cases.append(RequestCase(reason, namespace, pod, shape, uid))
    return cases


KARPENTER_USER = objects.service_account_user(
    "karpenter", "karpenter", "b6a1c7e2-0f3d-4f0a-9b7e-3c2d1e0f9a8b"
)


def admission_review(case: RequestCase) -> bytes:
    """The AdmissionReview v1 body the API server sends for `case` (bench/objects.py's
    `eviction_review`, as the tests post it), compactly encoded."""
    document = objects.eviction_review(
        case.namespace, case.pod, uid=case.uid, user=KARPENTER_USER,
        dry_run=case.shape is Shape.DRY_RUN,
        precondition_uid="00000000-0000-0000-0000-0" if case.shape is Shape.UID_MISMATCH else None,
    )  # fmt: skip
    if case.shape is Shape.NOT_EVICTION:
        document["request"].update(
            operation="DELETE",
            subResource="",
            object=None,
            options={"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"},
        )
    if case.shape is Shape.MALFORMED:
        document["apiVersion"] = "admission.k8s.io/v1beta1"
    return json.dumps(document, separators=(",", ":")).encode()


def prepared_requests(spec: PopulationSpec, layout: Layout) -> list[PreparedRequest]:
    return [PreparedRequest(case, admission_review(case)) for case in request_mix(spec, layout)]
