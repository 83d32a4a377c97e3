"""The webhook's decision table (docs/decisions.md), as pure code: each outcome a `Reason`,
anchored in the table under its value.

No I/O happens here. The caller does the lookups, hands in their results, and carries out
what the `Decision` asks for; the one caller loop is `EvictionWebhook._decide`
(controller/serving/webhook.py), and `graceful-drain plan` and `status` call `decide_eviction` with
lookups over what they listed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from functools import partial
from types import MappingProxyType
from typing import Any

import msgspec

from graceful_drain.controller.decision.intstr import ROLLING_UPDATE
from graceful_drain.controller.decision.model import (
    COMPLETED_AT_ANNOTATION,
    DEFAULT_ENABLED_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
    DeploymentInfo,
    Enablement,
    ObjectRef,
    PodInfo,
    ReplicaSetInfo,
)
from graceful_drain.kube.meta import HTTP_CONFLICT, json_pointer_token
from graceful_drain.kube.names import is_dns_label, is_dns_subdomain
from graceful_drain.kube.timefmt import as_utc, format_go_duration, format_rfc3339_micro

DEFAULT_ROLLOUT_TIMEOUT = timedelta(minutes=10)
MAX_DECIDE_ATTEMPTS = 2  # the first decision, plus one more after a 409 on the stamp
_MAX_DETAIL_CHARS = 200
_PREFIX = "graceful-drain: "


class Reason(StrEnum):
    """Stable, machine-readable outcome of one decision (logs, metrics, messages); each one
    is an anchor of docs/decisions.md."""

    DRY_RUN = "dry-run"
    NOT_EVICTION = "not-eviction"
    INVALID_NAME = "invalid-name"
    POD_GONE = "pod-gone"
    NAMESPACE_OUT_OF_SCOPE = "namespace-out-of-scope"
    CACHE_COLD = "cache-cold"
    POD_TERMINATING = "pod-terminating"
    UID_MISMATCH = "uid-mismatch"
    NO_DEPLOYMENT = "no-deployment"
    OWNER_UNRESOLVED = "owner-unresolved"
    DEPLOYMENT_DELETING = "deployment-deleting"
    OPTED_OUT = "opted-out"
    ENABLED_ANNOTATION_INVALID = "enabled-annotation-invalid"
    NOT_ENABLED = "not-enabled"
    REPLICAS_NOT_ONE = "replicas-not-one"
    READY_ELSEWHERE = "ready-elsewhere"
    CANNOT_SURGE = "cannot-surge"
    CANNOT_PROTECT = "cannot-protect"
    POD_NOT_READY = "pod-not-ready"
    SURGE_READY = "surge-ready"
    ROLLOUT_TIMEOUT = "rollout-timeout"
    ROLLOUT_IN_PROGRESS = "rollout-in-progress"
    ROLLOUT_REQUESTED = "rollout-requested"
    REREAD_FAILED = "reread-failed"
    STAMP_FAILED = "stamp-failed"
    ERROR = "error"
    MALFORMED_REVIEW = "malformed-review"

    @property
    def row(self) -> int:
        return ROW_OF_REASON[self]


# Every reason belongs to exactly one row of docs/decisions.md (3b counts as 3).
ROW_OF_REASON: Mapping[Reason, int] = MappingProxyType(
    {
        Reason.DRY_RUN: 1,
        Reason.NOT_EVICTION: 2,
        Reason.INVALID_NAME: 2,
        Reason.POD_GONE: 3,
        Reason.NAMESPACE_OUT_OF_SCOPE: 3,  # 3b
        Reason.CACHE_COLD: 4,
        Reason.POD_TERMINATING: 5,
        Reason.UID_MISMATCH: 6,
        Reason.NO_DEPLOYMENT: 7,
        Reason.OWNER_UNRESOLVED: 7,  # could not tell: never block a drain on it
        Reason.DEPLOYMENT_DELETING: 8,
        Reason.OPTED_OUT: 9,
        Reason.ENABLED_ANNOTATION_INVALID: 9,
        Reason.NOT_ENABLED: 9,
        Reason.REPLICAS_NOT_ONE: 10,
        Reason.READY_ELSEWHERE: 10,  # v3: replaces replicas-not-one (--protect=last-ready)
        Reason.CANNOT_SURGE: 11,
        Reason.CANNOT_PROTECT: 11,
        Reason.POD_NOT_READY: 12,
        Reason.SURGE_READY: 13,
        Reason.ROLLOUT_TIMEOUT: 14,
        Reason.ROLLOUT_IN_PROGRESS: 15,
        Reason.ROLLOUT_REQUESTED: 16,
        Reason.REREAD_FAILED: 16,
        Reason.STAMP_FAILED: 16,
        Reason.ERROR: 17,
        Reason.MALFORMED_REVIEW: 17,
    }
)
DENYING_REASONS = frozenset(
    {Reason.CACHE_COLD, Reason.ROLLOUT_IN_PROGRESS, Reason.ROLLOUT_REQUESTED, Reason.REREAD_FAILED}
)
# Allowed outcomes that also ask for a Warning event on the Deployment.
WARNING_REASONS = frozenset(
    {Reason.ENABLED_ANNOTATION_INVALID, Reason.CANNOT_SURGE, Reason.CANNOT_PROTECT}
)


class Protect(StrEnum):
    """Which Deployments' evictions are held (`--protect`, docs/decisions.md)."""

    LAST_READY = "last-ready"  # v3: the last Ready pod outside the nodes being drained
    SINGLE_REPLICA = "single-replica"  # v2: spec.replicas 1 only


@dataclass(frozen=True, slots=True)
class DecisionConfig:
    rollout_timeout: timedelta = DEFAULT_ROLLOUT_TIMEOUT
    # Opt-in mode when set: only Deployments whose annotation is "true" are protected.
    # Either way the key it names (else DEFAULT_ENABLED_ANNOTATION) set to "false" opts out.
    enabled_annotation: str | None = None
    namespaces: frozenset[str] | None = None  # the controller's scope; None: every namespace
    protect: Protect = Protect.LAST_READY

    @property
    def enabled_key(self) -> str:
        return self.enabled_annotation or DEFAULT_ENABLED_ANNOTATION

    def in_scope(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces


class EvictionRequest(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What the webhook reads from an AdmissionReview (see admission.parse_review). A frozen
    msgspec struct rather than a frozen dataclass: one is built per admission, and a frozen
    dataclass sets each of its 14 fields through object.__setattr__ (what that costs:
    bench/README.md, "Webhook, issue 14 target 1")."""

    uid: str
    operation: str
    group: str  # request.resource
    version: str
    resource: str
    sub_resource: str
    namespace: str
    name: str  # the pod's name
    dry_run: bool  # request.dryRun
    username: str
    precondition_uid: str | None = None  # Eviction deleteOptions.preconditions.uid
    options_dry_run: bool = False  # Eviction deleteOptions.dryRun is non-empty
    kind_group: str = "policy"  # request.kind.group
    kind: str = "Eviction"  # request.kind.kind

    @property
    def pod_ref(self) -> ObjectRef:
        return ObjectRef(self.namespace, self.name)

    @property
    def is_dry_run(self) -> bool:
        return self.dry_run or self.options_dry_run

    @property
    def is_pod_eviction_create(self) -> bool:
        return (
            self.operation == "CREATE"
            and self.group == ""
            and self.resource == "pods"
            and self.sub_resource == "eviction"
            and self.kind_group == "policy"
            and self.kind == "Eviction"
        )


# --- lookup results the caller hands in -------------------------------------------------------
# Frozen msgspec structs, as EvictionRequest: a few are built per admission.


class PodFound(msgspec.Struct, frozen=True):
    pod: PodInfo


class PodGone(msgspec.Struct, frozen=True):
    """Not in the cache, and a live GET answered 404."""


class PodUnavailable(msgspec.Struct, frozen=True):
    """Not in the cache, and the live GET failed (any error other than 404)."""

    detail: str = ""


class PodOutOfScope(msgspec.Struct, frozen=True):
    """The pod's namespace is outside the controller's scope: not looked up."""


PodLookup = PodFound | PodGone | PodOutOfScope | PodUnavailable


class DeploymentFound(msgspec.Struct, frozen=True):
    deployment: DeploymentInfo


class NoDeployment(msgspec.Struct, frozen=True):
    """The pod is not run by a Deployment (bare pod, StatefulSet, DaemonSet, Job, bare RS)."""

    detail: str


class OwnerUnresolved(msgspec.Struct, frozen=True):
    """The pod's ReplicaSet or Deployment could not be read. `cold`: the caches have not
    synced and the live read failed too, so nothing is known (`Reason.CACHE_COLD`, 429)."""

    detail: str
    cold: bool = False


OwnerLookup = DeploymentFound | NoDeployment | OwnerUnresolved

# The Deployment's Ready pods other than `pod`, not terminating, as a pod cache holds them
# (`ready_besides`), or only those of them on a node that is not being drained
# (`ready_elsewhere`, v3).
ReadyBesides = Callable[[PodInfo, DeploymentInfo], int]


def ready_besides_among(pod: PodInfo, pods: Iterable[PodInfo]) -> int:
    """How many of `pods` (the Deployment's) are Ready, not terminating, and not `pod`."""
    return sum(1 for other in pods if other.ready and not other.terminating
               and other.name != pod.name)  # fmt: skip


def ready_elsewhere_among(
    pod: PodInfo, pods: Iterable[PodInfo], being_drained: Callable[[str], bool]
) -> int:
    """How many of `pods` (the Deployment's) are Ready, not terminating, not `pod`, and run on
    a node for which `being_drained(node name)` is false (draining.py; a node the
    caller does not know counts as being drained: it is no place that stays)."""
    return sum(1 for other in pods if other.ready and not other.terminating
               and other.name != pod.name and other.node_name
               and not being_drained(other.node_name))  # fmt: skip


def resolve_owner(
    pod: PodInfo,
    find_replicaset: Callable[[str, str], ReplicaSetInfo | None],
    find_deployment: Callable[[str, str], DeploymentInfo | None],
) -> OwnerLookup:
    """pod -> ReplicaSet -> Deployment through two (namespace, name) lookups, e.g. the caches."""
    if pod.owner_kind is None:
        return NoDeployment("bare pod")
    if pod.owner_replicaset is None:
        return NoDeployment(f"controlled by a {pod.owner_kind}")
    replicaset = find_replicaset(pod.namespace, pod.owner_replicaset)
    if replicaset is None:
        return OwnerUnresolved(f"ReplicaSet {pod.namespace}/{pod.owner_replicaset} not found")
    if replicaset.owner_deployment is None:
        return NoDeployment(f"ReplicaSet {replicaset.ref} has no owning Deployment")
    deployment = find_deployment(pod.namespace, replicaset.owner_deployment)
    if deployment is None:
        return OwnerUnresolved(
            f"Deployment {pod.namespace}/{replicaset.owner_deployment} not found"
        )
    return DeploymentFound(deployment)


def decide_eviction(
    request: EvictionRequest,
    pod: PodLookup,
    find_replicaset: Callable[[str, str], ReplicaSetInfo | None],
    find_deployment: Callable[[str, str], DeploymentInfo | None],
    config: DecisionConfig,
    now: datetime,
    *,
    prechecked: bool = False,
    ready_besides: ReadyBesides | None = None,
    ready_elsewhere: ReadyBesides | None = None,
) -> Decision:
    """The first decision for a request whose pod was looked up: owner resolution, then the
    table. The webhook and `graceful-drain plan` both decide through here; `prechecked`,
    `ready_besides` and `ready_elsewhere` as for `decide`."""
    owner: OwnerLookup = (
        resolve_owner(pod.pod, find_replicaset, find_deployment)
        if isinstance(pod, PodFound)
        else _POD_NOT_FOUND  # never read unless PodFound
    )
    return decide(request, pod, owner, config, now, prechecked=prechecked,
                  ready_besides=ready_besides, ready_elsewhere=ready_elsewhere)  # fmt: skip


_POD_NOT_FOUND = NoDeployment("pod not found")


# --- the answer -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StampIntent:
    """`Reason.ROLLOUT_REQUESTED`: the caller must apply `patch` (JSON patch) to the Deployment,
    then answer 429."""

    deployment: DeploymentInfo
    stamped_at: datetime

    @property
    def value(self) -> str:
        return stamp_value(self.deployment, self.stamped_at)

    @property
    def patch(self) -> list[dict[str, Any]]:
        return stamp_patch(self.deployment, self.stamped_at)


# A decision's message, or what renders it: most decisions are allowed without anyone reading
# their message (only denials, warnings and Events carry it), so the table hands in a function.
Message = str | Callable[[], str]


@dataclass(frozen=True, slots=True, init=False, eq=False, repr=False)
class Decision:
    allowed: bool
    reason: Reason
    deployment: ObjectRef | None
    waited: timedelta | None  # since restarted-at, when the Deployment carries it
    stamp: StampIntent | None  # Reason.ROLLOUT_REQUESTED only
    _message: Message

    def __init__(
        self,
        allowed: bool,
        reason: Reason,
        message: Message,
        deployment: ObjectRef | None = None,
        waited: timedelta | None = None,
        stamp: StampIntent | None = None,
    ) -> None:
        setattr_ = object.__setattr__  # frozen
        setattr_(self, "allowed", allowed)
        setattr_(self, "reason", reason)
        setattr_(self, "_message", message)
        setattr_(self, "deployment", deployment)
        setattr_(self, "waited", waited)
        setattr_(self, "stamp", stamp)

    @property
    def message(self) -> str:
        """Human readable; the 429 message kubectl drain prints. Rendered on first read."""
        message = self._message
        if isinstance(message, str):
            return message
        text = message()
        object.__setattr__(self, "_message", text)
        return text

    def _key(self) -> tuple[object, ...]:
        return (self.allowed, self.reason, self.message, self.deployment, self.waited, self.stamp)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Decision(allowed={self.allowed!r}, reason={self.reason!r}, "
            f"message={self.message!r}, deployment={self.deployment!r}, "
            f"waited={self.waited!r}, stamp={self.stamp!r})"
        )

    @property
    def warning_event(self) -> bool:
        """Emit a Warning event on the Deployment (WARNING_REASONS; the reason says which)."""
        return self.reason in WARNING_REASONS

    @property
    def row(self) -> int:
        return self.reason.row


def _detail(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _MAX_DETAIL_CHARS:
        return text[: _MAX_DETAIL_CHARS - 3] + "..."
    return text


def _prefixed(render: Callable[[], str]) -> str:
    return _PREFIX + render()


def _with_prefix(message: Message) -> Message:
    return _PREFIX + message if isinstance(message, str) else partial(_prefixed, message)


def _allow(reason: Reason, message: Message, **fields: Any) -> Decision:
    """Most allowed decisions are never read beyond their reason: the table hands in a function
    that renders the message when someone reads it (a warning, an Event, a log line)."""
    return Decision(True, reason, _with_prefix(message), **fields)


def _deny(reason: Reason, message: str, **fields: Any) -> Decision:
    """A denial always sends its message: rendered at once."""
    return Decision(False, reason, _PREFIX + message, **fields)


def _waiting_message(deployment: ObjectRef, waited: timedelta, timeout: timedelta) -> str:
    return (
        f"waiting for a replacement of Deployment {deployment} to become Ready on another node "
        f"(rollout requested {format_go_duration(waited)} ago, "
        f"gives up after {format_go_duration(timeout)})"
    )


def _cannot_surge_why(deployment: DeploymentInfo) -> str | None:
    """Why a restart cannot bring up a replacement first, naming the field to change."""
    if deployment.paused:
        return "spec.paused is true, so a restart would not roll out; resume it to protect it"
    if deployment.strategy_type != ROLLING_UPDATE:
        return (
            f"spec.strategy.type is {deployment.strategy_type or '(malformed)'}; set it to "
            "RollingUpdate with maxSurge 1 and maxUnavailable 0 to protect it"
        )
    if deployment.max_surge <= 0:
        return "spec.strategy.rollingUpdate.maxSurge resolves to 0; set it to 1 to protect it"
    return None


def _cannot_protect_why(deployment: DeploymentInfo) -> str | None:
    """Why the rollout may take the last Ready pod away before a replacement is Ready:
    spec.replicas - resolved maxUnavailable < 1 (with one replica: maxUnavailable >= 1)."""
    replicas = deployment.replicas if deployment.replicas is not None else 1
    if replicas - deployment.max_unavailable < 1:
        return (
            f"spec.strategy.rollingUpdate.maxUnavailable resolves to "
            f"{deployment.max_unavailable} for {replicas} spec.replicas, so the rollout may "
            "remove the last Ready pod before a replacement is Ready; set it to 0 to protect it"
        )
    return None


# --- the table --------------------------------------------------------------------------------


def precheck(request: EvictionRequest) -> Decision | None:
    """`Reason.DRY_RUN`, `NOT_EVICTION`, `INVALID_NAME`: what needs no lookup. None: go on with
    the lookups and `decide`."""
    if request.is_dry_run:  # 1
        return _allow(Reason.DRY_RUN, "dry-run request, allowed without side effects")
    if not request.is_pod_eviction_create:  # 2
        return _allow(
            Reason.NOT_EVICTION,
            lambda: (
                f"not a CREATE of pods/eviction of kind policy Eviction ({request.operation} "
                f"{request.resource}/{request.sub_resource}, kind "
                f"{request.kind_group or 'core'}/{request.kind or '(none)'})"
            ),
        )
    if not (is_dns_label(request.namespace) and is_dns_subdomain(request.name)):  # 2
        return _allow(
            Reason.INVALID_NAME,
            lambda: (
                f"{_detail(repr(request.namespace))}/{_detail(repr(request.name))} is not a valid "
                "pod namespace/name; not looked up"
            ),
        )
    return None


def decide(
    request: EvictionRequest,
    pod: PodLookup,
    owner: OwnerLookup,
    config: DecisionConfig,
    now: datetime,
    *,
    prechecked: bool = False,
    ready_besides: ReadyBesides | None = None,
    ready_elsewhere: ReadyBesides | None = None,
) -> Decision:
    """The first matching row of the table. A bug raises: the webhook's one catch-all answers
    it `Reason.ERROR` (allow), and `plan` reports it as the error it is. `prechecked`: the
    caller has already had None from `precheck(request)` (the webhook, before its lookups).
    `ready_besides`: the Deployment's Ready pods other than the one evicted, as the caller's
    pod cache holds them (`surge-ready` under `--protect=single-replica`); without it,
    `surge-ready` reads `status.readyReplicas` alone. `ready_elsewhere`: those of them on a
    node that is not being drained (`ready-elsewhere`, `--protect=last-ready`); without it,
    none is known, and the eviction of a Ready pod is held."""
    return _first_matching_row(request, pod, owner, config, as_utc(now), prechecked,
                               ready_besides, ready_elsewhere)  # fmt: skip


def _first_matching_row(
    request: EvictionRequest,
    pod_lookup: PodLookup,
    owner: OwnerLookup,
    config: DecisionConfig,
    now: datetime,
    prechecked: bool,
    ready_besides: ReadyBesides | None,
    ready_elsewhere: ReadyBesides | None,
) -> Decision:
    early = None if prechecked else precheck(request)  # 1, 2
    if early is not None:
        return early

    if isinstance(pod_lookup, PodGone):  # 3
        return _allow(Reason.POD_GONE, lambda: f"pod {request.pod_ref} no longer exists")
    if isinstance(pod_lookup, PodOutOfScope) or not config.in_scope(request.namespace):  # 3b
        return _allow(
            Reason.NAMESPACE_OUT_OF_SCOPE,
            lambda: (
                f"namespace {request.namespace} is outside the controller's --namespaces; "
                f"pod {request.pod_ref} is not protected"
            ),
        )
    if isinstance(pod_lookup, PodUnavailable):  # 4: cold-cache caution, the one "deny on doubt"
        return _deny(
            Reason.CACHE_COLD,
            f"pod {request.pod_ref} is not in the controller's cache yet and could not be read "
            f"({_detail(pod_lookup.detail) or 'no detail'}); retry shortly",
        )
    pod = pod_lookup.pod

    if pod.terminating or pod.terminal:  # 5
        state = "terminating" if pod.terminating else f"finished (phase {pod.phase})"
        return _allow(Reason.POD_TERMINATING, lambda: f"pod {pod.ref} is already {state}")

    if request.precondition_uid is not None and request.precondition_uid != pod.uid:  # 6
        return _allow(
            Reason.UID_MISMATCH,
            lambda: (
                f"eviction precondition uid {request.precondition_uid!r} does not match pod "
                f"{pod.ref} uid {pod.uid!r}; the API server will reject it"
            ),
        )

    if isinstance(owner, NoDeployment):  # 7
        return _allow(
            Reason.NO_DEPLOYMENT, lambda: f"pod {pod.ref} has no owning Deployment ({owner.detail})"
        )
    if isinstance(owner, OwnerUnresolved) and owner.cold:  # 4: a cold cache never allows
        return _deny(
            Reason.CACHE_COLD,
            f"the controller's cache has not synced yet and the Deployment owning pod "
            f"{pod.ref} could not be read ({_detail(owner.detail)}); retry shortly",
        )
    if isinstance(owner, OwnerUnresolved):  # 7, could not tell: never block a drain on it
        return _allow(
            Reason.OWNER_UNRESOLVED,
            lambda: (
                f"could not resolve the Deployment owning pod {pod.ref} ({_detail(owner.detail)})"
            ),
        )
    deployment = owner.deployment
    ref = deployment.ref
    timeout = config.rollout_timeout
    # A finished drain's stamp only remains as the detector's evidence: it holds nothing.
    restarted_at = None if deployment.drain_finished else deployment.restarted_at
    waited = None if restarted_at is None else max(now - restarted_at, timedelta(0))
    known = {"deployment": ref, "waited": waited}
    # Our rollout keeps holding whatever replicas or strategy say (HPA, KEDA, kubectl scale),
    # unless it never started and cannot.
    ours_under_way = restarted_at is not None and (
        deployment.rollout_started or not deployment.paused
    )

    if deployment.deleting:  # 8
        return _allow(
            Reason.DEPLOYMENT_DELETING, lambda: f"Deployment {ref} is being deleted", **known
        )

    key, enablement = config.enabled_key, deployment.enablement
    if enablement is Enablement.INVALID:  # 9
        return _allow(
            Reason.ENABLED_ANNOTATION_INVALID,
            lambda: (
                f"Deployment {ref} has {key}: {_detail(repr(deployment.enabled_value))}, which is "
                'neither "true" nor "false"; treated as disabled'
            ),
            **known,
        )
    if enablement is Enablement.OFF:  # 9
        return _allow(
            Reason.OPTED_OUT, lambda: f'Deployment {ref} opted out ({key}: "false")', **known
        )
    if config.enabled_annotation is not None and enablement is not Enablement.ON:  # 9
        return _allow(
            Reason.NOT_ENABLED,
            lambda: f'Deployment {ref} has not opted in ({key}: "true")',
            **known,
        )

    last_ready = config.protect is Protect.LAST_READY
    if not last_ready and deployment.replicas != 1 and not ours_under_way:  # 10
        count = "a malformed" if deployment.replicas is None else str(deployment.replicas)
        return _allow(
            Reason.REPLICAS_NOT_ONE,
            lambda: f"Deployment {ref} has {count} spec.replicas; a PodDisruptionBudget handles it",
            **known,
        )
    if last_ready and pod.ready:  # 10 (v3): another Ready pod stays, or the replacement is up
        elsewhere = 0 if ready_elsewhere is None else ready_elsewhere(pod, deployment)
        if elsewhere >= 1:
            reason = Reason.SURGE_READY if restarted_at is not None else Reason.READY_ELSEWHERE
            return _allow(
                reason,
                lambda: (
                    f"Deployment {ref} keeps {elsewhere} other Ready pod(s) on nodes that are "
                    f"not being drained; evicting pod {pod.ref}"
                ),
                **known,
            )

    cannot_surge = None if ours_under_way else _cannot_surge_why(deployment)
    if cannot_surge is not None:  # 11
        return _allow(
            Reason.CANNOT_SURGE,
            lambda: (
                f"Deployment {ref} cannot surge a replacement ({cannot_surge}); evicting pod "
                f"{pod.ref} without one"
            ),
            **known,
        )
    cannot_protect = None if ours_under_way else _cannot_protect_why(deployment)
    if cannot_protect is not None:  # 11
        return _allow(
            Reason.CANNOT_PROTECT,
            lambda: (
                f"Deployment {ref} cannot keep a Ready pod through a restart ({cannot_protect}); "
                f"evicting pod {pod.ref} without starting one"
            ),
            **known,
        )

    if not pod.ready:  # 12
        return _allow(
            Reason.POD_NOT_READY,
            lambda: f"pod {pod.ref} is not Ready; a restart cannot make things worse",
            **known,
        )

    # 13: the status counts the replacement, and the replacement is there. The status alone
    # lags the pods: right after a rollout's old pod is gone it may still count it, and
    # evicting the one pod left would leave the Deployment without a Ready one.
    if (
        not last_ready
        and deployment.ready_replicas >= 2
        and (ready_besides is None or ready_besides(pod, deployment) >= 1)
    ):
        return _allow(
            Reason.SURGE_READY,
            lambda: (
                f"Deployment {ref} has {deployment.ready_replicas} Ready replicas; "
                "the replacement is up"
            ),
            **known,
        )

    if restarted_at is not None and waited is not None:
        # A stamp further in the future than the timeout cannot come from clock skew between
        # controller replicas; honouring it could block drains indefinitely.
        from_the_future = restarted_at - now > timeout
        if waited >= timeout or from_the_future:  # 14: the escape hatch
            return _allow(
                Reason.ROLLOUT_TIMEOUT,
                lambda: (
                    f"gave up waiting for a Ready replacement of Deployment {ref} "
                    + (
                        f"(restarted-at {deployment.restarted_at_raw} is too far in the future)"
                        if from_the_future
                        else f"after {format_go_duration(waited)} "
                        f"(rolloutTimeout {format_go_duration(timeout)})"
                    )
                    + f"; evicting pod {pod.ref}"
                ),
                **known,
            )
        return _deny(  # 15
            Reason.ROLLOUT_IN_PROGRESS, _waiting_message(ref, waited, timeout), **known
        )

    return _deny(  # 16: ask the reconciler for a rollout by stamping restarted-at
        Reason.ROLLOUT_REQUESTED,
        _waiting_message(ref, timedelta(0), timeout),
        deployment=ref,
        waited=timedelta(0),
        stamp=StampIntent(deployment=deployment, stamped_at=now),
    )


# --- ROLLOUT_REQUESTED: the stamp and its one retry -------------------------------------------


def stamp_value(deployment: DeploymentInfo, now: datetime) -> str:
    """restarted-at for a drain stamped at `now`: to the microsecond (so "waited 515ms" is
    true), but never the value the pod template already carries (a previous drain in the same
    microsecond), which the reconciler would read as a rollout already done."""
    value = format_rfc3339_micro(now)
    if value == deployment.template_restarted_at:
        value = format_rfc3339_micro(now + timedelta(microseconds=1))
    return value


def stamp_patch(deployment: DeploymentInfo, now: datetime) -> list[dict[str, Any]]:
    """The JSON patch (application/json-patch+json) that stamps restarted-at on `deployment`.

    Optimistic concurrency: `add /metadata/resourceVersion` carries the resourceVersion the
    decision was made on; if the Deployment changed since, the API server answers 409 Conflict
    (apiserver registry/generic/registry/store.go: a resourceVersion in the updated object that
    differs from the stored one is an OptimisticLockError). A failed `test` op would answer 422
    instead (apiserver endpoints/handlers/patch.go), so the `test` here only pins the object's
    identity. An absent annotations map must be added whole: a JSON patch cannot add a member
    to a missing parent. A finished drain's completed-at goes with the old stamp.
    """
    value = stamp_value(deployment, now)
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": deployment.uid}]
    if deployment.resource_version:
        ops.append(
            {
                "op": "add",
                "path": "/metadata/resourceVersion",
                "value": deployment.resource_version,
            }
        )
    if deployment.has_annotations:
        ops.append(
            {
                "op": "add",
                "path": "/metadata/annotations/" + json_pointer_token(RESTARTED_AT_ANNOTATION),
                "value": value,
            }
        )
    else:
        ops.append(
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": {RESTARTED_AT_ANNOTATION: value},
            }
        )
    if deployment.has_annotations and deployment.completed_at_raw is not None:
        ops.append(
            {
                "op": "remove",
                "path": "/metadata/annotations/" + json_pointer_token(COMPLETED_AT_ANNOTATION),
            }
        )
    return ops


class FollowUp(Enum):
    REREAD_AND_DECIDE = "reread-and-decide"  # GET the Deployment live, call decide() again


def after_stamp_failure(
    decision: Decision, *, status: int | None, attempt: int, detail: str = ""
) -> Decision | FollowUp:
    """The caller's rule when the stamp patch of `decision` failed.

    `status` is the HTTP status of the PATCH (None: no HTTP answer, e.g. a timeout);
    `attempt` counts the decisions made for this request so far (1 for the first).
    On 409, re-read the Deployment and decide once more; on anything else, or a second
    failure, allow: never block a drain because the controller could not write.
    """
    if status == HTTP_CONFLICT and attempt < MAX_DECIDE_ATTEMPTS:
        return FollowUp.REREAD_AND_DECIDE
    what = "no HTTP response" if status is None else f"HTTP {status}"
    if detail:
        what = f"{what}: {_detail(detail)}"
    target = (
        "its Deployment" if decision.deployment is None else f"Deployment {decision.deployment}"
    )
    return _allow(
        Reason.STAMP_FAILED,
        f"could not request a rollout of {target} ({what}); allowing the eviction",
        deployment=decision.deployment,
        waited=decision.waited,
    )


def reread_failed(decision: Decision, detail: str) -> Decision:
    """`Reason.REREAD_FAILED`: the stamp met a 409 and the Deployment could not be read again.
    Someone is changing it right now (most likely another replica stamping it): 429, the client
    retries in seconds, rather than letting the pod go without a replacement."""
    target = (
        "its Deployment" if decision.deployment is None else f"Deployment {decision.deployment}"
    )
    return _deny(
        Reason.REREAD_FAILED,
        f"{target} changed while a rollout was being requested and could not be read again "
        f"({_detail(detail) or 'no detail'}); retry shortly",
        deployment=decision.deployment,
        waited=decision.waited,
    )


# --- ERROR, MALFORMED_REVIEW ------------------------------------------------------------------


def unexpected_error(request: EvictionRequest | None, error: BaseException | str) -> Decision:
    """`Reason.ERROR`: allow; the caller logs it and counts it."""
    what = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    target = "" if request is None else f" for pod {request.pod_ref}"
    return _allow(
        Reason.ERROR, f"unexpected error{target} ({_detail(what)}); allowing the eviction"
    )


def malformed_review(problem: str) -> Decision:
    """`Reason.MALFORMED_REVIEW`: the body is not a usable AdmissionReview: allow."""
    return _allow(
        Reason.MALFORMED_REVIEW, f"malformed AdmissionReview ({_detail(problem)}); allowed"
    )
