"""The webhook's decision table (docs/decisions.md), as pure code: which `Reason` a request
ends on, tried in the order of the docs' table, and the words of every decision's message.
`decide` goes through the table's phases in that order (`precheck`, the pod, the owner,
opt-in, protection, our rollout, the stamp): each returns its `Decision`, or None to go on.

No I/O happens here. The caller does the lookups (lookups.py), hands in their results, and
carries out what the `Decision` asks for (a `StampIntent`: stamp.py); the one caller loop is
`EvictionWebhook._decide` (controller/serving/webhook.py), and `graceful-drain plan` and
`status` call `decide_eviction` with lookups over what they listed. A decision is chosen and
its message written here only: reasons.py names the reasons, and adding one changes that
catalogue, this table, docs/decisions.md and the table tests, no other file
(tests/unit/controller/test_reasons.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache, partial

from graceful_drain.annotations import DEFAULT_ENABLED_ANNOTATION, DEFAULT_ROLLOUT_TIMEOUT
from graceful_drain.controller.decision.intstr import ROLLING_UPDATE
from graceful_drain.controller.decision.ledger import MAX_ENTRIES, recorded_recently
from graceful_drain.controller.decision.lookups import (
    DeploymentFound,
    NoDeployment,
    OwnerLookup,
    OwnerUnresolved,
    PodFound,
    PodGone,
    PodLookup,
    PodUnavailable,
    ReadyBesides,
    resolve_owner,
)
from graceful_drain.controller.decision.model import (
    DeploymentInfo,
    Enablement,
    ObjectRef,
    PodInfo,
    ReplicaSetInfo,
)
from graceful_drain.controller.decision.reasons import Decision, Message, Reason
from graceful_drain.controller.decision.request import EvictionRequest
from graceful_drain.controller.decision.stamp import (
    MAX_DECIDE_ATTEMPTS,
    FollowUp,
    RecordIntent,
    StampIntent,
    WriteFailure,
)
from graceful_drain.kube.names import is_dns_label, is_dns_subdomain
from graceful_drain.kube.timefmt import as_utc, format_go_duration

_MAX_DETAIL_CHARS = 200
_PREFIX = "graceful-drain: "
_ZERO = timedelta(0)  # built once: a timedelta costs a call to construct
# The rollout timeout as every held eviction's message writes it: one per configuration.
_timeout_text = lru_cache(maxsize=16)(format_go_duration)


class Protect(StrEnum):
    """Which Deployments' evictions are held (`--protect`, docs/decisions.md)."""

    LAST_READY = "last-ready"  # v3: the last Ready pod outside the nodes being drained
    SINGLE_REPLICA = "single-replica"  # v2: spec.replicas 1 only


# Members compared on every decision, read once: on Python 3.11 a member read through its Enum
# class costs four times a global (EnumType's `__getattr__` slows every read of the class).
_ON, _LAST_READY = Enablement.ON, Protect.LAST_READY


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


# --- rendering ------------------------------------------------------------------------------


def _detail(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _MAX_DETAIL_CHARS:
        return text[: _MAX_DETAIL_CHARS - 3] + "..."
    return text


def _prefixed(render: Callable[[], str]) -> str:
    return _PREFIX + render()


def _with_prefix(message: Message) -> Message:
    return _PREFIX + message if isinstance(message, str) else partial(_prefixed, message)


def _allow(
    reason: Reason,
    message: Message,
    deployment: ObjectRef | None = None,
    waited: timedelta | None = None,
    record: RecordIntent | None = None,
) -> Decision:
    """Most allowed decisions are never read beyond their reason: the table hands in a function
    that renders the message when someone reads it (a warning, an Event, a log line)."""
    return Decision(True, reason, _with_prefix(message), deployment, waited, None, record)


def _deny(
    reason: Reason,
    message: str,
    deployment: ObjectRef | None = None,
    waited: timedelta | None = None,
    stamp: StampIntent | None = None,
) -> Decision:
    """A denial always sends its message: rendered at once."""
    return Decision(False, reason, _PREFIX + message, deployment, waited, stamp)


def _waiting_message(deployment: ObjectRef, waited: timedelta, timeout: timedelta) -> str:
    return (
        f"waiting for a replacement of Deployment {deployment} to become Ready on another node "
        f"(rollout requested {format_go_duration(waited)} ago, "
        f"gives up after {_timeout_text(timeout)})"
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


def _ledger_full(deployment: DeploymentInfo, now: datetime) -> Decision | None:
    """`Reason.WRITE_DEFERRED` when the ledger already holds MAX_ENTRIES pods whose deletion
    is not confirmed yet (as the eviction subresource refuses past MaxDisruptedPodSize), so a
    pod could not be recorded: held, never let go unrecorded. It empties by itself as the
    deletions are seen."""
    if len(deployment.evictions) < MAX_ENTRIES:
        return None
    counting = sum(1 for entry in deployment.evictions if entry.counts(now))
    if counting < MAX_ENTRIES:
        return None
    return _deny(
        Reason.WRITE_DEFERRED,
        f"the eviction record (ledger) on Deployment {deployment.ref} holds {counting} pods "
        "let go whose deletion is not confirmed yet; the eviction is held and the controller "
        "will retry once they are, retry shortly",
        deployment.ref,
    )


# --- the table --------------------------------------------------------------------------------


def precheck(request: EvictionRequest) -> Decision | None:
    """`Reason.DRY_RUN`, `NOT_EVICTION`, `INVALID_NAME`: what needs no lookup. None: go on with
    the lookups and `decide`."""
    if request.is_dry_run:
        return _allow(Reason.DRY_RUN, "dry-run request, allowed without side effects")
    if not request.is_pod_eviction_create:
        return _allow(
            Reason.NOT_EVICTION,
            lambda: (
                f"not a CREATE of pods/eviction of kind policy Eviction ({request.operation} "
                f"{request.resource}/{request.sub_resource}, kind "
                f"{request.kind_group or 'core'}/{request.kind or '(none)'})"
            ),
        )
    if not (is_dns_label(request.namespace) and is_dns_subdomain(request.name)):
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
    pod_lookup: PodLookup,
    owner: OwnerLookup,
    config: DecisionConfig,
    now: datetime,
    *,
    prechecked: bool = False,
    ready_besides: ReadyBesides | None = None,
    ready_elsewhere: ReadyBesides | None = None,
) -> Decision:
    """The first matching line of the table. A bug raises: the webhook's one catch-all answers
    it `Reason.ERROR` (allow), and `plan` reports it as the error it is. `prechecked`: the
    caller has already had None from `precheck(request)` (the webhook, before its lookups).
    `ready_besides`: the Deployment's Ready pods other than the one evicted, as the caller's
    pod cache holds them (`surge-ready` under `--protect=single-replica`); without it,
    `surge-ready` reads `status.readyReplicas` alone. `ready_elsewhere`: those of them on a
    node that is not being drained (`ready-elsewhere`, `--protect=last-ready`); without it,
    none is known, and the eviction of a Ready pod is held. The phases of the table, in its
    order: each returns its decision, or None to go on (decisions are always true, so `or`
    takes the first phase that decides)."""
    now = as_utc(now)
    early = None if prechecked else precheck(request)  # dry-run, not-eviction, invalid-name
    if early is not None:
        return early
    if not isinstance(pod_lookup, PodFound) or not config.in_scope(request.namespace):
        return _pod_not_looked_up(request, pod_lookup, config)
    pod = pod_lookup.pod
    checked = _pod_checks(request, pod)
    if checked is not None:
        return checked
    if not isinstance(owner, DeploymentFound):
        return _owner(pod, owner)
    deployment = owner.deployment
    # A finished drain's stamp only remains as the detector's evidence: it holds nothing.
    restarted_at = None if deployment.drain_finished else deployment.restarted_at
    waited = None if restarted_at is None else max(now - restarted_at, _ZERO)
    ref = deployment.ref
    return (
        _opt_in(deployment, ref, waited, config)
        or _protection(pod, deployment, ref, waited, restarted_at, config, now, ready_elsewhere)
        or _our_rollout(pod, deployment, ref, waited, restarted_at, config, now, ready_besides)
        or _stamp(deployment, ref, config, now)
    )


# --- the phases, in the table's order -------------------------------------------------------


def _pod_not_looked_up(
    request: EvictionRequest, pod_lookup: PodLookup, config: DecisionConfig
) -> Decision:
    """`Reason.POD_GONE`, `NAMESPACE_OUT_OF_SCOPE`, `CACHE_COLD`: there is no pod to decide on
    (or none to be read: its namespace is outside the controller's scope)."""
    if isinstance(pod_lookup, PodGone):
        return _allow(Reason.POD_GONE, lambda: f"pod {request.pod_ref} no longer exists")
    if isinstance(pod_lookup, PodUnavailable) and config.in_scope(request.namespace):
        return _deny(  # the one "deny on doubt"
            Reason.CACHE_COLD,
            f"pod {request.pod_ref} is not in the controller's cache yet and could not be read "
            f"({_detail(pod_lookup.detail) or 'no detail'}); retry shortly",
        )
    return _allow(  # PodOutOfScope, or any pod of a namespace outside the scope
        Reason.NAMESPACE_OUT_OF_SCOPE,
        lambda: (
            f"namespace {request.namespace} is outside the controller's --namespaces; "
            f"pod {request.pod_ref} is not protected"
        ),
    )


def _pod_checks(request: EvictionRequest, pod: PodInfo) -> Decision | None:
    """`Reason.POD_TERMINATING`, `UID_MISMATCH`: the eviction would change nothing."""
    if pod.terminating or pod.terminal:
        state = "terminating" if pod.terminating else f"finished (phase {pod.phase})"
        return _allow(Reason.POD_TERMINATING, lambda: f"pod {pod.ref} is already {state}")
    if request.precondition_uid is not None and request.precondition_uid != pod.uid:
        return _allow(
            Reason.UID_MISMATCH,
            lambda: (
                f"eviction precondition uid {request.precondition_uid!r} does not match pod "
                f"{pod.ref} uid {pod.uid!r}; the API server will reject it"
            ),
        )
    return None


def _owner(pod: PodInfo, owner: NoDeployment | OwnerUnresolved) -> Decision:
    """`Reason.NO_DEPLOYMENT`, `CACHE_COLD`, `OWNER_UNRESOLVED`: no Deployment to protect, or
    none that could be read."""
    if isinstance(owner, NoDeployment):
        return _allow(
            Reason.NO_DEPLOYMENT, lambda: f"pod {pod.ref} has no owning Deployment ({owner.detail})"
        )
    if owner.cold:  # a cold cache never allows
        return _deny(
            Reason.CACHE_COLD,
            f"the controller's cache has not synced yet and the Deployment owning pod "
            f"{pod.ref} could not be read ({_detail(owner.detail)}); retry shortly",
        )
    return _allow(  # could not tell: never block a drain
        Reason.OWNER_UNRESOLVED,
        lambda: f"could not resolve the Deployment owning pod {pod.ref} ({_detail(owner.detail)})",
    )


def _opt_in(
    deployment: DeploymentInfo, ref: ObjectRef, waited: timedelta | None, config: DecisionConfig
) -> Decision | None:
    """`Reason.DEPLOYMENT_DELETING`, `ENABLED_ANNOTATION_INVALID`, `OPTED_OUT`, `NOT_ENABLED`:
    the Deployment does not ask to be protected (it is leaving, or its annotation says no)."""
    if deployment.deleting:
        return _allow(
            Reason.DEPLOYMENT_DELETING, lambda: f"Deployment {ref} is being deleted", ref, waited
        )
    enablement = deployment.enablement
    if enablement is _ON:  # the usual answer first: one comparison
        return None
    key = config.enabled_key
    if enablement is Enablement.INVALID:
        return _allow(
            Reason.ENABLED_ANNOTATION_INVALID,
            lambda: (
                f"Deployment {ref} has {key}: {_detail(repr(deployment.enabled_value))}, which is "
                'neither "true" nor "false"; treated as disabled'
            ),
            ref,
            waited,
        )
    if enablement is Enablement.OFF:
        return _allow(
            Reason.OPTED_OUT, lambda: f'Deployment {ref} opted out ({key}: "false")', ref, waited
        )
    if config.enabled_annotation is not None:  # opt-in mode, and not "true"
        return _allow(
            Reason.NOT_ENABLED,
            lambda: f'Deployment {ref} has not opted in ({key}: "true")',
            ref,
            waited,
        )
    return None


def _protection(
    pod: PodInfo,
    deployment: DeploymentInfo,
    ref: ObjectRef,
    waited: timedelta | None,
    restarted_at: datetime | None,
    config: DecisionConfig,
    now: datetime,
    ready_elsewhere: ReadyBesides | None,
) -> Decision | None:
    """`Reason.REPLICAS_NOT_ONE`, `READY_ELSEWHERE` (or `SURGE_READY`), `CANNOT_SURGE`,
    `CANNOT_PROTECT`, `POD_NOT_READY`: the pod needs no protection, or the Deployment cannot
    be given one. Our rollout keeps holding whatever replicas or strategy say (HPA, KEDA,
    kubectl scale), unless it never started and cannot."""
    ours_under_way = restarted_at is not None and (
        deployment.rollout_started or not deployment.paused
    )
    last_ready = config.protect is _LAST_READY
    if not last_ready and deployment.replicas != 1 and not ours_under_way:
        count = "a malformed" if deployment.replicas is None else str(deployment.replicas)
        return _allow(
            Reason.REPLICAS_NOT_ONE,
            lambda: f"Deployment {ref} has {count} spec.replicas; a PodDisruptionBudget handles it",
            ref,
            waited,
        )
    if last_ready and pod.ready:  # another Ready pod stays, or the replacement is up
        elsewhere = 0 if ready_elsewhere is None else ready_elsewhere(pod, deployment)
        if elsewhere >= 1:
            return _recorded(
                Reason.SURGE_READY if restarted_at is not None else Reason.READY_ELSEWHERE,
                lambda: (
                    f"Deployment {ref} keeps {elsewhere} other Ready pod(s) on nodes that are "
                    f"not being drained; evicting pod {pod.ref}"
                ),
                pod, deployment, ref, waited, now,
            )  # fmt: skip
    if not ours_under_way:
        unprotectable = _unprotectable(pod, deployment, ref, waited)
        if unprotectable is not None:
            return unprotectable
    if not pod.ready:
        # Recorded too: "not Ready" is this replica's view, and another replica's (a pod cache
        # a moment older or newer) may count the same pod as the Ready one that stays.
        return _recorded(
            Reason.POD_NOT_READY,
            lambda: f"pod {pod.ref} is not Ready; a restart cannot make things worse",
            pod, deployment, ref, waited, now,
        )  # fmt: skip
    return None


def _unprotectable(
    pod: PodInfo, deployment: DeploymentInfo, ref: ObjectRef, waited: timedelta | None
) -> Decision | None:
    """`Reason.CANNOT_SURGE`, `CANNOT_PROTECT`: a restart of the Deployment would not keep a
    Ready pod (no rollout of ours is under way)."""
    cannot_surge = _cannot_surge_why(deployment)
    if cannot_surge is not None:
        return _allow(
            Reason.CANNOT_SURGE,
            lambda: (
                f"Deployment {ref} cannot surge a replacement ({cannot_surge}); evicting pod "
                f"{pod.ref} without one"
            ),
            ref,
            waited,
        )
    cannot_protect = _cannot_protect_why(deployment)
    if cannot_protect is not None:
        return _allow(
            Reason.CANNOT_PROTECT,
            lambda: (
                f"Deployment {ref} cannot keep a Ready pod through a restart ({cannot_protect}); "
                f"evicting pod {pod.ref} without starting one"
            ),
            ref,
            waited,
        )
    return None


def _our_rollout(
    pod: PodInfo,
    deployment: DeploymentInfo,
    ref: ObjectRef,
    waited: timedelta | None,
    restarted_at: datetime | None,
    config: DecisionConfig,
    now: datetime,
    ready_besides: ReadyBesides | None,
) -> Decision | None:
    """`Reason.SURGE_READY` (`--protect=single-replica`), `ROLLOUT_TIMEOUT`,
    `ROLLOUT_IN_PROGRESS`: a Ready pod whose replacement is up, or a rollout of ours that
    holds it until then, or until it times out."""
    # --protect=single-replica: the status counts the replacement, and the replacement is
    # there. The status alone lags the pods: right after a rollout's old pod is gone it may
    # still count it, and evicting the one pod left would leave the Deployment without a
    # Ready one.
    if (
        config.protect is not _LAST_READY
        and deployment.ready_replicas >= 2
        and (ready_besides is None or ready_besides(pod, deployment) >= 1)
    ):
        return _recorded(
            Reason.SURGE_READY,
            lambda: (
                f"Deployment {ref} has {deployment.ready_replicas} Ready replicas; "
                "the replacement is up"
            ),
            pod, deployment, ref, waited, now,
        )  # fmt: skip
    if restarted_at is None or waited is None:
        return None
    timeout = config.rollout_timeout
    # A stamp further in the future than the timeout cannot come from clock skew between
    # controller replicas; honouring it could block drains indefinitely.
    from_the_future = restarted_at - now > timeout
    if waited >= timeout or from_the_future:  # the escape hatch
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
            ref,
            waited,
        )
    return _deny(Reason.ROLLOUT_IN_PROGRESS, _waiting_message(ref, waited, timeout), ref, waited)


def _stamp(
    deployment: DeploymentInfo, ref: ObjectRef, config: DecisionConfig, now: datetime
) -> Decision:
    """`Reason.ROLLOUT_REQUESTED`: ask the reconciler for a rollout by stamping restarted-at."""
    return _deny(
        Reason.ROLLOUT_REQUESTED,
        _waiting_message(ref, _ZERO, config.rollout_timeout),
        ref,
        _ZERO,
        StampIntent(deployment=deployment, stamped_at=now),
    )


def _recorded(
    reason: Reason,
    message: Callable[[], str],
    pod: PodInfo,
    deployment: DeploymentInfo,
    ref: ObjectRef,
    waited: timedelta | None,
    now: datetime,
) -> Decision:
    """An allow that counts on other pods, or on this one not being counted: recorded in the
    ledger first (docs/decisions.md, "The ledger"), or held while the ledger is full. A pod
    already recorded recently (a retried eviction) is allowed without a write."""
    if recorded_recently(deployment.evictions, pod.name, pod.uid, now):
        return _allow(reason, message, ref, waited)
    full = _ledger_full(deployment, now)
    if full is not None:
        return full
    record = RecordIntent(deployment=deployment, pod=pod.name, uid=pod.uid, recorded_at=now)
    return _allow(reason, message, ref, waited, record)


# --- after a write failed: re-decide, hold, or allow -------------------------------------------


def _write_what(decision: Decision) -> str:
    target = (
        "its Deployment" if decision.deployment is None else f"Deployment {decision.deployment}"
    )
    if decision.stamp is not None:
        return f"the rollout request (restarted-at) on {target}"
    return f"the eviction record (ledger) on {target}"


def after_write_failure(
    decision: Decision,
    failure: WriteFailure,
    *,
    status: int | None,
    attempt: int,
    detail: str = "",
    failing_for: timedelta | None = None,
    rollout_timeout: timedelta = DEFAULT_ROLLOUT_TIMEOUT,
) -> Decision | FollowUp:
    """The caller's rule when the write of `decision` (its stamp or its ledger record) failed
    (docs/decisions.md, "When a write fails").

    `failure` classifies the PATCH's answer (stamp.py `classify_write_failure`); `status` is
    its HTTP status (None: no HTTP answer, e.g. a timeout); `attempt` counts the decisions made
    for this request so far (1 for the first); `failing_for`: how long writes to this
    Deployment have failed for now, as this replica saw them (None: this is the first).
    A conflict re-reads the Deployment and decides again (at most MAX_DECIDE_ATTEMPTS
    decisions, then held); a failure for now holds (429) until `rollout_timeout` has passed
    since the first one, then allows; so does a write not sent for want of time
    (`WriteFailure.UNSENT`, held as `Reason.BUDGET_SPENT`); a refusal allows.
    """
    what = "no HTTP response" if status is None else f"HTTP {status}"
    if detail:
        what = f"{what}: {_detail(detail)}"
    write = _write_what(decision)
    deployment, waited = decision.deployment, decision.waited
    if failure is WriteFailure.CONFLICT and attempt < MAX_DECIDE_ATTEMPTS:
        return FollowUp.REREAD_AND_DECIDE
    if failure is WriteFailure.CONFLICT:
        return _deny(
            Reason.WRITE_DEFERRED,
            f"{write} kept conflicting with other writers ({what}); the controller will "
            "retry, retry shortly",
            deployment,
            waited,
        )
    if failure is WriteFailure.TRANSIENT or failure is WriteFailure.UNSENT:
        failed = failing_for or timedelta(0)
        if failure is WriteFailure.UNSENT:
            what = f"not sent: {_detail(detail)}" if detail else "not sent in time"
        if failed >= rollout_timeout:
            return _allow(
                Reason.WRITE_TIMEOUT,
                f"{write} has failed for {format_go_duration(failed)} (rolloutTimeout "
                f"{format_go_duration(rollout_timeout)}), last {what}; allowing the eviction",
                deployment,
                waited,
            )
        if failure is WriteFailure.UNSENT:
            return _deny(
                Reason.BUDGET_SPENT,
                f"{write} could not be made before the API server's webhook timeout ({what}); "
                "the eviction is held, retry shortly",
                deployment,
                waited,
            )
        return _deny(
            Reason.WRITE_DEFERRED,
            f"{write} failed for now ({what}); the eviction is held and the controller will "
            f"retry, for at most {format_go_duration(rollout_timeout - failed)} more",
            deployment,
            waited,
        )
    if decision.stamp is not None:
        return _allow(
            Reason.STAMP_FAILED,
            f"could not request a rollout: {write} was refused ({what}); allowing the eviction",
            deployment,
            waited,
        )
    return _allow(
        Reason.RECORD_FAILED,
        f"{write} was refused ({what}); allowing the eviction",
        deployment,
        waited,
    )


def reread_failed(decision: Decision, detail: str) -> Decision:
    """`Reason.REREAD_FAILED`: a write met a 409 and the Deployment could not be read again.
    Someone is changing it right now (most likely another replica stamping it): 429, the client
    retries in seconds, rather than letting the pod go without a replacement."""
    target = (
        "its Deployment" if decision.deployment is None else f"Deployment {decision.deployment}"
    )
    return _deny(
        Reason.REREAD_FAILED,
        f"{target} changed while it was being written and could not be read again "
        f"({_detail(detail) or 'no detail'}); retry shortly",
        decision.deployment,
        decision.waited,
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
