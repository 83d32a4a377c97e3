"""The HTTPS admission webhook on pods/eviction: `POST /validate-eviction`.

`EvictionWebhook.review` is the caller's loop around the pure table of decision/table.py:
precheck, cache lookups (with a live GET for a pod the cache lacks, and for an owner it lacks
while the caches have not synced), decide, and the one side effect a decision may ask for: the
restarted-at JSON patch of `Reason.ROLLOUT_REQUESTED`, or the ledger record of
`Reason.READY_ELSEWHERE` and `Reason.SURGE_READY` (decision/ledger.py). A write that conflicts
re-reads the Deployment live and decides again; one that failed for now holds (429,
`Reason.WRITE_DEFERRED`) until --rollout-timeout has passed since the first such failure
(`_failing`, this replica's memory: a liveness bound, not safety), then allows; a refusal
allows (docs/decisions.md, "When a write fails"). Every path ends in a valid AdmissionReview
answered with HTTP 200: a 5xx would make the API server apply failurePolicy and tell the client
nothing, so even a bug is answered "allow" (`Reason.ERROR`), logged and counted.

All live API calls share one budget per request, so that the answer comes back before the
API server gives up on us and applies failurePolicy (Ignore: the eviction would go unchecked).
It is counted from the request's `Arrival` (http.py: the connection's accept, or the read of
its first bytes), not from when its handler ran, and it is the shorter of `budget_seconds`
and the API server's own `?timeout=` less ANSWER_MARGIN_SECONDS (kept for the answer's way
back). A write is not started with less than MIN_WRITE_SECONDS of it left: the eviction is
held instead (`Reason.BUDGET_SPENT`), never allowed. Each admission's log line says how long
its request waited before its handler ran (`queued_ms`) and the API calls it made (`calls`).

A held eviction (429) of a pod whose node carries a deadline the drain client will enforce
(`deadlines`, decision/deadline.py: Karpenter's NodeClaim terminationGracePeriod) gets the
deadline appended to its message (`with_deadline`), whatever the decision's reason.

Events are handed to `events` (writes/events.py's DrainEvents) and forgotten: a
`RolloutRequested` after a successful stamp, an `EvictionHeld` for every answer
`Reason.ROLLOUT_IN_PROGRESS`, a `DeploymentWarning` for every decision asking for one, a
`DeadlineAhead` for every held eviction with a deadline.
Rate limits and series are the event side's business, not the webhook's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

import msgspec
from msgspec import UNSET, UnsetType

from graceful_drain.controller.decision.deadline import PodDeadline, pod_deadline, with_deadline
from graceful_drain.controller.decision.ledger import PodUid
from graceful_drain.controller.decision.lookups import (
    DeploymentFound,
    NoDeployment,
    OwnerLookup,
    OwnerUnresolved,
    PodFound,
    PodGone,
    PodLookup,
    PodOutOfScope,
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
from graceful_drain.controller.decision.stamp import (
    FollowUp,
    StampIntent,
    WriteFailure,
    classify_write_failure,
)
from graceful_drain.controller.decision.table import (
    DecisionConfig,
    after_write_failure,
    decide,
    malformed_review,
    precheck,
    reread_failed,
    unexpected_error,
)
from graceful_drain.controller.serving.admission import (
    TOO_LARGE,
    MalformedReview,
    answer_malformed,
    encode_review_response,
    parse_review,
)
from graceful_drain.controller.serving.http import Arrival
from graceful_drain.controller.serving.metrics import Metrics
from graceful_drain.controller.writes.events import (
    DeadlineAhead,
    DeploymentWarning,
    DrainEvent,
    EvictionHeld,
    RolloutRequested,
)
from graceful_drain.controller.writes.patcher import DeploymentPatcher
from graceful_drain.kube.client import error_detail, http_status, status_message
from graceful_drain.kube.meta import utc_now
from graceful_drain.logs import EventLine, get_logger, line_fields

WEBHOOK_PATH = "/validate-eviction"
# Deployments whose writes `_failing` remembers failing at once, at most (oldest forgotten).
_FAILING_REMEMBERED = 4096
DEFAULT_BUDGET_SECONDS = 4.0  # the shipped ValidatingWebhookConfiguration has timeoutSeconds 5
DEFAULT_CALL_TIMEOUT_SECONDS = 2.0
# Of the API server's `?timeout=`, kept for the answer's way back: encoding, the event loop's
# turn, TLS, the API server reading it. The budget ends this long before the API server's.
ANSWER_MARGIN_SECONDS = 1.0
# A write is not sent with less of the budget left: it would not land in time, and a write
# that timed out may still land, which costs the next decision a live read.
MIN_WRITE_SECONDS = 0.5

_log = get_logger("webhook")
_admission_line = EventLine("webhook")

# Reasons every admission compares against, read once: on Python 3.11 a member read through
# its Enum class costs four times a global (EnumType's `__getattr__` sends every attribute of
# an Enum class down the slow path of attribute lookup).
_POD_NOT_READY, _ROLLOUT_IN_PROGRESS, _BUDGET_SPENT = (
    Reason.POD_NOT_READY, Reason.ROLLOUT_IN_PROGRESS, Reason.BUDGET_SPENT,
)  # fmt: skip

# Decisions logged as a warning, with their message: the controller could not do its part.
_WARNING_LINE_REASONS = frozenset(
    {
        Reason.STAMP_FAILED,
        Reason.RECORD_FAILED,
        Reason.WRITE_DEFERRED,
        Reason.BUDGET_SPENT,
        Reason.WRITE_TIMEOUT,
        Reason.REREAD_FAILED,
        Reason.MALFORMED_REVIEW,
        Reason.ERROR,
    }
)


class AdmissionLine(msgspec.Struct, gc=False):
    """The fields of the one line logged per admission, in this order; the last six only when
    they say something (UNSET fields are left out). A struct rather than a dict: msgspec writes
    its keys from pre-encoded names, and it is built in a single call."""

    uid: str | None
    pod: str | None  # namespace/name
    deployment: str | None  # namespace/name
    decision: str  # "allow" or "deny"
    reason: Reason  # written as its value
    latency_ms: float
    # from the request's arrival (http.py `Arrival`) to its handler: accept, TLS, the loop
    queued_ms: float | UnsetType = UNSET
    user: str | UnsetType = UNSET
    node: str | UnsetType = UNSET
    attempts: int | UnsetType = UNSET
    stamped: bool | UnsetType = UNSET
    recorded: bool | UnsetType = UNSET
    # the API calls made, in order ("patch 409 812ms"), and the budget they had
    calls: list[str] | UnsetType = UNSET
    budget_ms: float | UnsetType = UNSET
    message: str | UnsetType = UNSET  # on the warning and error lines only


_POD_NOT_FOUND = NoDeployment("pod not found")
# What an Outcome holds until _decide sets the decision: never answered, since _decide either
# sets one or raises (answered `Reason.ERROR`).
NOT_DECIDED = unexpected_error(None, "not decided")


class ClusterView(Protocol):
    """What the webhook reads: the informer cache plus its live fallbacks (cache/cluster.py)."""

    def cached_pod(self, namespace: str, name: str) -> PodInfo | None: ...

    async def read_pod(self, namespace: str, name: str, *, budget: float) -> PodLookup: ...

    def replicaset(self, namespace: str, name: str) -> ReplicaSetInfo | None: ...

    def deployment(self, namespace: str, name: str) -> DeploymentInfo | None: ...

    def ready_besides(self, pod: PodInfo, deployment: DeploymentInfo) -> int: ...

    def ready_elsewhere(self, pod: PodInfo, deployment: DeploymentInfo) -> int: ...

    async def resolve_owner_live(self, pod: PodInfo, *, budget: float) -> OwnerLookup: ...

    @property
    def ledger_pod_uid(self) -> PodUid | None: ...

    async def read_deployment(self, namespace: str, name: str, *, budget: float) -> OwnerLookup: ...


class EventSink(Protocol):
    """Where the webhook hands its events (writes/events.py's DrainEvents): it must only
    enqueue, never block; whatever it returns or raises does not change the answer."""

    def emit(self, event: DrainEvent) -> object: ...


# --- the loop ---------------------------------------------------------------------------------


class Outcome(msgspec.Struct):
    """What one review came to, for logs, metrics and tests. A msgspec struct: one is built
    per admission, at a fraction of a dataclass's cost."""

    decision: Decision
    request: EvictionRequest | None = None
    pod: PodInfo | None = None
    attempts: int = 0  # decide() calls
    stamped: bool = False
    recorded: bool = False  # the pod was added to the Deployment's ledger
    error: BaseException | None = None
    deadline: PodDeadline | None = None  # a held pod's drain-client deadline (deadline.py)
    decided_at: datetime | None = None  # the clock when the deadline was read
    queued: float | None = None  # seconds from the request's arrival to its handler
    budget: float | None = None  # seconds the review's API calls had, at its handler's start
    calls: list[str] = msgspec.field(default_factory=list)  # "patch 409 812ms", in order


class _Deadline(msgspec.Struct, gc=False):
    """The end of one review's budget on the `clock` (time.monotonic): every API call it makes
    is bounded by what is left, a read also by the per-call cap. A msgspec struct: one is
    built per admission."""

    end: float
    call_cap: float
    clock: Callable[[], float]

    def call_timeout(self) -> float:
        return max(0.0, min(self.call_cap, self.end - self.clock()))

    def remaining(self) -> float:
        return max(0.0, self.end - self.clock())


class EvictionWebhook:
    def __init__(
        self,
        cluster: ClusterView,
        patcher: DeploymentPatcher,
        *,
        config: DecisionConfig,
        metrics: Metrics | None = None,
        events: EventSink | None = None,
        clock: Callable[[], datetime] = utc_now,
        budget_seconds: float = DEFAULT_BUDGET_SECONDS,
        call_timeout_seconds: float = DEFAULT_CALL_TIMEOUT_SECONDS,
        deadlines: Callable[[str], datetime | None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        min_write_seconds: float = MIN_WRITE_SECONDS,
    ) -> None:
        self.cluster = cluster
        # node name -> the drain client's termination deadline (cache/cluster.py `node_deadline`)
        self._deadlines = deadlines
        self.patcher = patcher
        self.config = config
        self.metrics = metrics
        self.events = events
        self._clock = clock
        self._budget = budget_seconds
        self._call_timeout = call_timeout_seconds
        self._min_write = min_write_seconds
        # the clock of the budgets and of `_failing`: the webhook server's (`Arrival.at`)
        self._monotonic = monotonic
        self._unobserved: list[tuple[Outcome, float]] = []  # answered, not yet observed
        # (namespace, name) of a Deployment -> (monotonic time of the first, of the last) write
        # to it that failed for now (or was not sent for want of time), since the last one that
        # succeeded: the liveness bound (`Reason.WRITE_TIMEOUT`); and whether its next decision
        # reads it live first (the last write was sent and may have landed: a PATCH that timed
        # out). Memory on purpose: it bounds liveness, not safety, and the Deployment is what
        # cannot be written (docs/decisions.md).
        self._failing: dict[tuple[str, str], tuple[float, float, bool]] = {}

    # --- HTTP -----------------------------------------------------------------------------------

    async def answer(self, body: bytes | None, arrival: Arrival | None = None) -> bytes:
        """The HTTP answer's body for one request body (None: over MAX_REVIEW_BYTES, not kept
        by the server), which arrived at `arrival` (None: now, with no timeout of the
        client's known); serving/http.py sends it with status 200. Never raises. The answer is
        logged, counted and its events handed over in the next turn of the event loop."""
        started = time.perf_counter()
        if body is None:
            payload = answer_malformed(MalformedReview("", TOO_LARGE))
            outcome = Outcome(malformed_review(TOO_LARGE))
        else:
            payload, outcome = await self.review(body, arrival)
        self._observe_later(outcome, time.perf_counter() - started)
        return payload

    # --- the review -----------------------------------------------------------------------------

    async def review(self, body: bytes, arrival: Arrival | None = None) -> tuple[bytes, Outcome]:
        """The response body for one AdmissionReview request body. Never raises."""
        outcome = Outcome(NOT_DECIDED)
        try:
            parsed = parse_review(body)
            if isinstance(parsed, MalformedReview):
                return answer_malformed(parsed), Outcome(parsed.decision())
            outcome.request = parsed
            await self._decide(parsed, outcome, arrival)
        except Exception as error:  # the one catch-all: any bug allows (`Reason.ERROR`)
            outcome.decision = unexpected_error(outcome.request, error)
            outcome.error = error
        # Without a request, no uid: the API server matches none and applies failurePolicy
        # (Ignore: it admits too).
        uid = "" if outcome.request is None else outcome.request.uid
        return encode_review_response(uid, outcome.decision), outcome

    def _table(
        self, request: EvictionRequest, pod_lookup: PodLookup, owner: OwnerLookup
    ) -> Decision:
        """The table's decision on what was looked up: the one call of `decide`."""
        return decide(
            request, pod_lookup, owner, self.config, self._clock(), prechecked=True,
            ready_besides=self.cluster.ready_besides,
            ready_elsewhere=self.cluster.ready_elsewhere,
        )  # fmt: skip

    def _deadline(self, arrival: Arrival | None, outcome: Outcome) -> _Deadline:
        """The review's budget: from its arrival (now, without one), the shorter of
        `budget_seconds` and the API server's timeout less ANSWER_MARGIN_SECONDS."""
        now = self._monotonic()
        budget, since = self._budget, now
        if arrival is not None:
            since = min(arrival.at, now)
            outcome.queued = now - since
            if arrival.timeout is not None:
                budget = min(budget, arrival.timeout - ANSWER_MARGIN_SECONDS)
        end = since + budget
        outcome.budget = max(0.0, end - now)
        return _Deadline(end, self._call_timeout, self._monotonic)

    def _called(self, outcome: Outcome, what: str, result: object, started: float) -> None:
        """Note one API call of the review for its log line: what, how it ended, how long."""
        took = (self._monotonic() - started) * 1000
        outcome.calls.append(f"{what} {result} {took:.0f}ms")

    async def _decide(
        self, request: EvictionRequest, outcome: Outcome, arrival: Arrival | None = None
    ) -> None:
        """Precheck, the lookups, the table, then what its decision asks for: a live read of
        a pod the cache says is not Ready, the write, a held pod's deadline."""
        early = precheck(request)  # no lookups, no side effects
        if early is not None:
            outcome.decision = early
            return
        deadline = self._deadline(arrival, outcome)
        clock = self._monotonic
        # NAMESPACE_OUT_OF_SCOPE: the pod is never read, that may well be forbidden
        pod_lookup: PodLookup = PodOutOfScope()
        if self.config.in_scope(request.namespace):
            cached = self.cluster.cached_pod(request.namespace, request.name)
            if cached is not None:
                pod_lookup = PodFound(cached)
            else:  # the cache may simply be cold: read live (404: the pod is gone)
                started = clock()
                pod_lookup = await self.cluster.read_pod(
                    request.namespace, request.name, budget=deadline.call_timeout()
                )
                self._called(outcome, "get-pod", _looked_up(pod_lookup), started)
        owner: OwnerLookup = _POD_NOT_FOUND  # never read unless PodFound
        if isinstance(pod_lookup, PodFound):
            outcome.pod = pod_lookup.pod
            owner = resolve_owner(pod_lookup.pod, self.cluster.replicaset, self.cluster.deployment)
            if isinstance(owner, OwnerUnresolved):  # a cold cache reads it live
                started = clock()
                owner = await self.cluster.resolve_owner_live(
                    pod_lookup.pod, budget=deadline.call_timeout()
                )
                self._called(outcome, "get-owner", _owner_found(owner), started)
            failing = (
                self._failing.get(owner.deployment.ref_key)
                if self._failing and isinstance(owner, DeploymentFound)  # usually none failing
                else None
            )
            if isinstance(owner, DeploymentFound) and failing is not None and failing[2]:
                # A write to it failed for now: it may have landed. Read before writing (a
                # failed read keeps the cached view; its write is guarded all the same).
                started = clock()
                live = await self.cluster.read_deployment(
                    owner.deployment.namespace, owner.deployment.name,
                    budget=deadline.call_timeout(),
                )  # fmt: skip
                self._called(outcome, "get-deployment", _owner_found(live), started)
                if isinstance(live, DeploymentFound):
                    owner = live
        decision = self._table(request, pod_lookup, owner)
        if decision.reason is _POD_NOT_READY and isinstance(pod_lookup, PodFound):
            pod_lookup, decision = await self._not_ready_live(
                request, pod_lookup, owner, decision, outcome, deadline
            )
        outcome.attempts = 1
        if decision.write is not None:
            decision = await self._write(request, pod_lookup, decision, outcome, deadline)
        if not decision.allowed:
            decision = self._with_deadline(decision, outcome)
        outcome.decision = decision

    async def _not_ready_live(
        self,
        request: EvictionRequest,
        pod_lookup: PodFound,
        owner: OwnerLookup,
        decision: Decision,
        outcome: Outcome,
        deadline: _Deadline,
    ) -> tuple[PodLookup, Decision]:
        """`Reason.POD_NOT_READY`: "not Ready" may be this pod cache's lag, and a Ready pod is
        never let go on it: the pod read live decides (docs/decisions.md, `pod-not-ready`). A
        failed read keeps the cached view; its ledger record is written all the same."""
        started = self._monotonic()
        live_pod = await self.cluster.read_pod(
            request.namespace, request.name, budget=deadline.call_timeout()
        )
        self._called(outcome, "get-pod", _looked_up(live_pod), started)
        if not (isinstance(live_pod, PodFound) and live_pod.pod.ready):
            return pod_lookup, decision
        outcome.pod = live_pod.pod
        return live_pod, self._table(request, live_pod, owner)

    async def _write(
        self,
        request: EvictionRequest,
        pod_lookup: PodLookup,
        decision: Decision,
        outcome: Outcome,
        deadline: _Deadline,
    ) -> Decision:
        """Make the write `decision` asks for (the stamp or the ledger record); on a conflict
        re-read the Deployment and decide again (`after_write_failure`). The final decision."""
        while (write := decision.write) is not None:
            target = write.deployment
            key = target.ref_key
            left = deadline.remaining()
            if left < self._min_write:
                return self._budget_spent(decision, outcome, key, left)
            patch = (
                write.patch
                if isinstance(write, StampIntent)
                else write.patch(self.cluster.ledger_pod_uid)
            )
            started = self._monotonic()
            try:
                # The whole remaining budget, not the per-call cap: a slow write that lands
                # still decides the eviction; cutting it short would hold it needlessly.
                async with asyncio.timeout(left):
                    await self.patcher.patch_json(target.namespace, target.name, patch)
            except Exception as error:
                status = http_status(error)
                timed_out = isinstance(error, TimeoutError)
                self._called(outcome, "patch", "timeout" if timed_out else status, started)
                failure = classify_write_failure(status, status_message(error))
                failing_for = (
                    self._note_failure(key, sent=True)
                    if failure is WriteFailure.TRANSIENT
                    else None
                )
                follow_up = after_write_failure(
                    decision,
                    failure,
                    status=status,
                    attempt=outcome.attempts,
                    detail="timed out" if timed_out else error_detail(error),
                    failing_for=failing_for,
                    rollout_timeout=self.config.rollout_timeout,
                )
                if isinstance(follow_up, Decision):
                    return follow_up
                assert follow_up is FollowUp.REREAD_AND_DECIDE
                started = self._monotonic()
                owner = await self.cluster.read_deployment(
                    target.namespace, target.name, budget=deadline.call_timeout()
                )
                self._called(outcome, "get-deployment", _owner_found(owner), started)
                if isinstance(owner, OwnerUnresolved):
                    return reread_failed(decision, owner.detail)
                outcome.attempts += 1
                decision = self._table(request, pod_lookup, owner)
                continue
            self._called(outcome, "patch", "ok", started)
            self._failing.pop(key, None)
            if isinstance(write, StampIntent):
                outcome.stamped = True
                self._rollout_requested(target.ref, outcome.pod, write.value)
            else:
                outcome.recorded = True
            return decision
        return decision

    def _budget_spent(
        self, decision: Decision, outcome: Outcome, key: tuple[str, str], left: float
    ) -> Decision:
        """Too late to write and answer within the API server's timeout: held, never allowed
        unwritten (`Reason.BUDGET_SPENT`); nothing was sent, so nothing to read back next
        time. It counts toward the liveness bound all the same."""
        held = after_write_failure(
            decision, WriteFailure.UNSENT, status=None, attempt=outcome.attempts,
            detail=_too_late(outcome, left, self._min_write),
            failing_for=self._note_failure(key, sent=False),
            rollout_timeout=self.config.rollout_timeout,
        )  # fmt: skip
        assert isinstance(held, Decision)
        return held

    def _with_deadline(self, decision: Decision, outcome: Outcome) -> Decision:
        """A held eviction of a pod whose node carries a drain client's deadline: the deadline
        appended to its message (deadline.py)."""
        pod = outcome.pod
        if pod is None or decision.deployment is None or self._deadlines is None:
            return decision
        ahead = pod_deadline(pod.node_name, self._deadlines(pod.node_name), pod.grace_seconds)
        if ahead is None:
            return decision
        outcome.deadline, outcome.decided_at = ahead, self._clock()
        return with_deadline(decision, ahead, outcome.decided_at)

    def _note_failure(self, key: tuple[str, str], *, sent: bool) -> timedelta:
        """A write to the Deployment `key` failed for now (`sent`: it went out and may have
        landed; else it was not sent for want of time): how long writes to it have been
        failing (0 for the first failure, or the first after a quiet rollout timeout)."""
        now = self._monotonic()
        first, last, _ = self._failing.get(key, (now, now, False))
        if now - last > self.config.rollout_timeout.total_seconds():
            first = now  # the earlier failures were another episode
        self._failing[key] = (first, now, sent)
        if len(self._failing) > _FAILING_REMEMBERED:
            self._failing.pop(next(iter(self._failing)))
        return timedelta(seconds=now - first)

    # --- after the decision ---------------------------------------------------------------------

    def _observe_later(self, outcome: Outcome, seconds: float) -> None:
        """Count, log and hand over the events of an answer in the next turn of the event loop,
        with every other answer of this turn: the answers go out first, and the bookkeeping of
        all of them runs back to back, which costs less CPU under load than between each two
        answers (bench/README.md, "Observing the answers after they are sent")."""
        self._unobserved.append((outcome, seconds))
        if len(self._unobserved) == 1:
            asyncio.get_running_loop().call_soon(self._observe_gathered)

    def _observe_gathered(self) -> None:
        gathered, self._unobserved = self._unobserved, []
        for outcome, seconds in gathered:
            self._observe(outcome, seconds)

    def _rollout_requested(self, deployment: ObjectRef, pod: PodInfo | None, value: str) -> None:
        if self.metrics is not None:
            self.metrics.rollouts_started.inc()
        if pod is not None:
            self._emit(RolloutRequested(deployment, pod.ref, pod.node_name, value))

    def _observe(self, outcome: Outcome, seconds: float) -> None:
        decision, request, pod = outcome.decision, outcome.request, outcome.pod
        try:
            if self.metrics is not None:
                # From the request's arrival, as the API server's timeout counts: a review
                # that waited for the event loop is as late for it as a slow one.
                queued = 0.0 if outcome.queued is None else outcome.queued
                self.metrics.record_decision(decision, queued + seconds)
            self._log(outcome, seconds)
            if pod is None or decision.deployment is None:
                return
            if decision.reason is _ROLLOUT_IN_PROGRESS:
                self._emit(
                    EvictionHeld(decision.deployment, pod.ref, pod.node_name, decision.waited)
                )
            if outcome.deadline is not None and outcome.decided_at is not None:
                self._emit(
                    DeadlineAhead(decision.deployment, pod.ref, outcome.deadline,
                                  outcome.decided_at)
                )  # fmt: skip
            if decision.warning_event:
                self._emit(
                    DeploymentWarning(
                        decision.deployment, pod.ref, decision.reason, decision.message
                    )
                )
        except Exception as error:  # observing must never change the answer
            _log.error("observing the decision failed", error=error_detail(error),
                       uid=None if request is None else request.uid)  # fmt: skip

    def _emit(self, event: DrainEvent) -> None:
        if self.events is None:
            return
        try:
            self.events.emit(event)
        except Exception as error:
            _log.error("handing over an event failed", kind=type(event).__name__,
                       error=error_detail(error))  # fmt: skip

    @staticmethod
    def _log(outcome: Outcome, seconds: float) -> None:
        decision, request, pod = outcome.decision, outcome.request, outcome.pod
        deployment, reason = decision.deployment, decision.reason
        line = AdmissionLine(
            uid=None if request is None else request.uid,
            pod=None if request is None else f"{request.namespace}/{request.name}",
            deployment=None if deployment is None else f"{deployment.namespace}/{deployment.name}",
            decision="allow" if decision.allowed else "deny",
            reason=reason,
            latency_ms=_ms(seconds),
            queued_ms=UNSET if outcome.queued is None else _ms(outcome.queued),
            user=UNSET if request is None else request.username,
            node=UNSET if pod is None else pod.node_name,
            attempts=outcome.attempts if outcome.attempts > 1 else UNSET,
            stamped=True if outcome.stamped else UNSET,
            recorded=True if outcome.recorded else UNSET,
        )
        if outcome.calls or reason is _BUDGET_SPENT:
            line.calls = outcome.calls
            if outcome.budget is not None:
                line.budget_ms = _ms(outcome.budget)
        if outcome.error is not None:
            line.message = decision.message
            _log.error("admission", exc_info=outcome.error, **line_fields(line))
        elif reason in _WARNING_LINE_REASONS:
            line.message = decision.message
            _admission_line.warning("admission", line)
        else:
            _admission_line.info("admission", line)


def _ms(seconds: float) -> float:
    """Seconds as milliseconds to the microsecond, for the log line (a third of `round`'s
    cost, which formats the number to round it)."""
    return int(seconds * 1_000_000 + 0.5) / 1000


def _looked_up(lookup: PodLookup) -> str:
    """How a live read of a pod ended, for the log line's `calls`."""
    if isinstance(lookup, PodFound):
        return "ok"
    return "404" if isinstance(lookup, PodGone) else "failed"


def _owner_found(owner: OwnerLookup) -> str:
    """How a live read of an owner ended, for the log line's `calls`."""
    if isinstance(owner, DeploymentFound):
        return "ok"
    return "failed" if isinstance(owner, OwnerUnresolved) else "404"


def _too_late(outcome: Outcome, left: float, least: float) -> str:
    """Why a write was not sent: the budget left, and how long the request had waited."""
    text = f"{left:.2f}s of the webhook's budget left, under the {least:g}s a write needs"
    if outcome.queued is not None:
        text += f"; the request waited {outcome.queued:.2f}s before the webhook read it"
    return text
