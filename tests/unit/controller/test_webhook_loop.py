"""The webhook's caller loop around decide(), with an in-memory cluster and a scripted patcher."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightkube import ApiError
from lightkube.models.meta_v1 import Status
from prometheus_client.parser import text_string_to_metric_families

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.ledger import PodUid
from graceful_drain.controller.decision.lookups import (
    DeploymentFound,
    NoDeployment,
    OwnerLookup,
    OwnerUnresolved,
    PodFound,
    PodGone,
    PodLookup,
    PodUnavailable,
    resolve_owner,
)
from graceful_drain.controller.decision.model import DeploymentInfo, PodInfo, ReplicaSetInfo
from graceful_drain.controller.decision.reasons import Reason
from graceful_drain.controller.decision.stamp import MAX_DECIDE_ATTEMPTS
from graceful_drain.controller.decision.table import DecisionConfig
from graceful_drain.controller.serving.http import Arrival
from graceful_drain.controller.serving.metrics import Metrics
from graceful_drain.controller.serving.webhook import EvictionWebhook, Outcome
from graceful_drain.controller.writes.events import (
    DRAIN_STARTED,
    DRAIN_WAITING,
    WARNING_EVENT_REASON,
    DrainEvent,
    DrainEvents,
    held_message,
    started_message,
)
from graceful_drain.kube.events import NORMAL, WARNING, InvolvedObject
from graceful_drain.kube.ratelimit import RateLimiter

from .objects import NOW, POD, REPLICASET, UID, deployment, review_body


def conflict() -> ApiError:
    return ApiError(status=Status(code=409, reason="Conflict", message="object modified"))


def server_error() -> ApiError:
    return ApiError(status=Status(code=500, reason="InternalError", message="etcd down"))


def api_error(code: int) -> ApiError:
    return ApiError(status=Status(code=code, reason="Refused", message=f"refused with {code}"))


def unavailable() -> ApiError:
    return api_error(503)


def throttled() -> ApiError:
    return api_error(429)


@dataclass
class FakeCluster:
    pod: PodLookup = field(default_factory=lambda: PodFound(POD))
    replicasets: dict[str, ReplicaSetInfo] = field(default_factory=lambda: {"web-5d9": REPLICASET})
    deployments: dict[str, DeploymentInfo] = field(default_factory=lambda: {"web": deployment()})
    reread: list[OwnerLookup] = field(default_factory=list)
    others_ready: int = 1  # the Deployment's Ready pods besides the evicted one
    others_elsewhere: int = 0  # ... of them, on nodes that are not being drained
    synced: bool = True  # False: the caches are cold, an owner they lack is read live
    live_owner: OwnerLookup | None = None  # what that live read finds
    live_pod: PodLookup | None = None  # what a live read of the pod finds (None: as cached)
    lookups: int = 0
    live_pod_reads: int = 0
    rereads: int = 0

    def cached_pod(self, namespace: str, name: str) -> PodInfo | None:
        self.lookups += 1
        return self.pod.pod if isinstance(self.pod, PodFound) else None

    async def read_pod(self, namespace: str, name: str, *, budget: float) -> PodLookup:
        assert budget > 0
        if isinstance(self.pod, Exception):
            raise self.pod
        self.live_pod_reads += 1
        return self.pod if self.live_pod is None else self.live_pod

    def replicaset(self, namespace: str, name: str) -> ReplicaSetInfo | None:
        return self.replicasets.get(name)

    def deployment(self, namespace: str, name: str) -> DeploymentInfo | None:
        return self.deployments.get(name)

    def ready_besides(self, pod: PodInfo, deployment: DeploymentInfo) -> int:
        return self.others_ready

    def ready_elsewhere(self, pod: PodInfo, deployment: DeploymentInfo) -> int:
        return self.others_elsewhere

    @property
    def ledger_pod_uid(self) -> PodUid | None:
        return None  # no synced pod cache: no deletion observed

    async def resolve_owner_live(self, pod: PodInfo, *, budget: float) -> OwnerLookup:
        cached = resolve_owner(pod, self.replicaset, self.deployment)
        if self.synced or not isinstance(cached, OwnerUnresolved):
            return cached
        assert self.live_owner is not None
        return self.live_owner

    async def read_deployment(self, namespace: str, name: str, *, budget: float) -> OwnerLookup:
        self.rereads += 1
        return self.reread.pop(0)


@dataclass
class ScriptedPatcher:
    failures: list[BaseException] = field(default_factory=list)
    patches: list[tuple[str, str, list[dict[str, Any]]]] = field(default_factory=list)
    latency: float = 0.0  # how long the API server takes to answer each PATCH

    async def patch_json(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> None:
        self.patches.append((namespace, name, patch))
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.failures:
            raise self.failures.pop(0)


@dataclass(frozen=True)
class Recorded:
    regarding: InvolvedObject
    type: str
    reason: str
    message: str


@dataclass
class ListRecorder:
    """The EventRecorder's `record`, kept in a list: what reaches the API server's queue."""

    events: list[Recorded] = field(default_factory=list)

    def record(self, regarding: InvolvedObject, type_: str, reason: str, message: str) -> None:
        self.events.append(Recorded(regarding, type_, reason, message))


@dataclass
class Rig:
    cluster: FakeCluster
    patcher: ScriptedPatcher
    webhook: EvictionWebhook
    metrics: Metrics
    events: list[Recorded]


@pytest.fixture
def rig() -> Rig:
    """The webhook with the event path the controller runs: DrainEvents over a recorder."""
    cluster, patcher, metrics, recorder = (
        FakeCluster(),
        ScriptedPatcher(),
        Metrics(),
        ListRecorder(),
    )
    webhook = EvictionWebhook(
        cluster, patcher, config=DecisionConfig(), metrics=metrics,
        events=DrainEvents(recorder), clock=lambda: NOW,
    )  # fmt: skip
    return Rig(cluster, patcher, webhook, metrics, recorder.events)


async def answer(rig: Rig, body: bytes | None = None) -> dict[str, Any]:
    payload, outcome = await rig.webhook.review(review_body() if body is None else body)
    rig.webhook._observe(outcome, 0.001)
    document = json.loads(payload)
    assert document["apiVersion"] == "admission.k8s.io/v1"
    assert document["kind"] == "AdmissionReview"
    response: dict[str, Any] = document["response"]
    return response


def counted(rig: Rig, allowed: str, reason: str) -> float:
    """graceful_drain_decisions_total{allowed, reason} as /metrics shows it."""
    for family in text_string_to_metric_families(rig.metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == "graceful_drain_decisions_total" and sample.labels == {
                "allowed": allowed,
                "reason": reason,
            }:
                return sample.value
    raise AssertionError(f"no decisions_total series for allowed={allowed} reason={reason}")


def reason_of(response: dict[str, Any]) -> str:
    text = response.get("status", {}).get("message") or " ".join(response.get("warnings", []))
    return text


async def test_stamp_then_429_naming_the_deployment(rig: Rig) -> None:
    response = await answer(rig)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert "default/web" in response["status"]["message"]
    [(namespace, name, patch)] = rig.patcher.patches
    assert (namespace, name) == ("default", "web")
    assert patch[-1]["path"] == "/metadata/annotations/" + RESTARTED_AT_ANNOTATION.replace(
        "/", "~1"
    )
    assert patch[-1]["value"] == "2024-05-01T12:00:00.000000Z"
    assert rig.events == [
        Recorded(
            InvolvedObject.deployment("default", "web"), NORMAL, DRAIN_STARTED,
            started_message(POD.ref, "node-a", "2024-05-01T12:00:00.000000Z"),
        )
    ]  # fmt: skip
    assert rig.metrics.rollouts_started._value.get() == 1


async def test_a_stamp_slower_than_the_per_call_cap_but_within_the_budget_holds(
    rig: Rig,
) -> None:
    """Issue 15: a 2.5 s PATCH under a 2 s per-call cap used to fail open (scaled here 10x)."""
    rig.webhook = EvictionWebhook(
        rig.cluster, rig.patcher, config=DecisionConfig(), clock=lambda: NOW,
        budget_seconds=0.4, call_timeout_seconds=0.2, min_write_seconds=0.05,
    )  # fmt: skip
    rig.patcher.latency = 0.25
    response = await answer(rig)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert len(rig.patcher.patches) == 1


async def test_a_stamp_slower_than_the_whole_budget_is_cut_there_and_holds(rig: Rig) -> None:
    """Issue 37: a PATCH slower than the webhook's budget may still land; the eviction is
    held (write-deferred), not let go without its replacement."""
    rig.webhook = EvictionWebhook(
        rig.cluster, rig.patcher, config=DecisionConfig(), clock=lambda: NOW,
        budget_seconds=0.2, call_timeout_seconds=0.1, min_write_seconds=0.05,
    )  # fmt: skip
    rig.patcher.latency = 5.0  # cancelled at the budget: the test ends long before this
    response = await answer(rig)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429


async def test_409_rereads_and_decides_once_more(rig: Rig) -> None:
    rig.patcher.failures = [conflict()]
    stamped_by_another_replica = deployment(
        restarted_at=NOW - timedelta(seconds=5), restarted_at_raw="2024-05-01T11:59:55Z"
    )
    rig.cluster.reread = [DeploymentFound(stamped_by_another_replica)]
    response = await answer(rig)
    assert response["allowed"] is False
    assert "rollout requested 5s ago" in response["status"]["message"]
    assert rig.cluster.rereads == 1
    assert len(rig.patcher.patches) == 1  # ROLLOUT_IN_PROGRESS now: nothing more to stamp


async def test_409_on_every_decision_holds_for_a_retry(rig: Rig) -> None:
    """Contention (several replicas writing at once) never lets the pod go: after
    MAX_DECIDE_ATTEMPTS decisions, each on a fresh read, the eviction is held, and the
    client retries in seconds."""
    rig.patcher.failures = [conflict()] * MAX_DECIDE_ATTEMPTS
    versions = [str(43 + n) for n in range(MAX_DECIDE_ATTEMPTS - 1)]
    rig.cluster.reread = [DeploymentFound(deployment(resource_version=rv)) for rv in versions]
    response = await answer(rig)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert len(rig.patcher.patches) == MAX_DECIDE_ATTEMPTS
    assert rig.patcher.patches[-1][2][1] == {
        "op": "add", "path": "/metadata/resourceVersion", "value": versions[-1],
    }  # fmt: skip
    assert counted(rig, "false", "write-deferred") == 1
    assert "HTTP 409" in reason_of(response)


async def test_409_then_deployment_gone_allows(rig: Rig) -> None:
    rig.patcher.failures = [conflict()]
    rig.cluster.reread = [NoDeployment("Deployment default/web no longer exists")]
    response = await answer(rig)
    assert response["allowed"] is True
    assert rig.events == []


@pytest.mark.parametrize(
    "failure",
    [server_error(), unavailable(), throttled(), ConnectionError("reset"), TimeoutError()],
    ids=repr,
)
async def test_a_stamp_failed_for_now_holds_and_says_the_controller_retries(
    rig: Rig, failure: BaseException
) -> None:
    rig.patcher.failures = [failure]
    response = await answer(rig)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert "the controller will retry" in response["status"]["message"]
    assert rig.cluster.rereads == 0
    assert [event.reason for event in rig.events] == ["GracefulDrainWriteDeferred"]
    assert counted(rig, "false", "write-deferred") == 1


@pytest.mark.parametrize("code", [400, 403, 404, 422])
async def test_a_refused_stamp_allows_with_a_warning(rig: Rig, code: int) -> None:
    rig.patcher.failures = [api_error(code)]
    response = await answer(rig)
    assert response["allowed"] is True
    assert [(e.type, e.reason) for e in rig.events] == [(WARNING, "GracefulDrainWriteFailed")]
    assert counted(rig, "true", "stamp-failed") == 1


async def test_after_a_failure_for_now_the_next_attempt_reads_live_before_writing(
    rig: Rig,
) -> None:
    """A PATCH that timed out may have landed: the next request reads the Deployment live, and
    finds the stamp (a rollout in progress), so it does not write again."""
    rig.patcher.failures = [TimeoutError()]
    assert (await answer(rig))["allowed"] is False
    landed = deployment(restarted_at=NOW, restarted_at_raw="2024-05-01T12:00:00.000000Z",
                        resource_version="43")  # fmt: skip
    rig.cluster.reread = [DeploymentFound(landed)]
    response = await answer(rig)
    assert response["allowed"] is False
    assert rig.cluster.rereads == 1
    assert len(rig.patcher.patches) == 1  # ROLLOUT_IN_PROGRESS: nothing written twice
    assert counted(rig, "false", "rollout-in-progress") == 1


def clocked(rig: Rig, now: list[float], **config: Any) -> EvictionWebhook:
    """The rig's webhook with its monotonic clock at `now[0]`."""
    return EvictionWebhook(
        rig.cluster, rig.patcher, config=DecisionConfig(**config), metrics=rig.metrics,
        events=DrainEvents(ListRecorder()), clock=lambda: NOW, monotonic=lambda: now[0],
    )  # fmt: skip


async def arrived(rig: Rig, at: float, api_timeout: float | None = 5.0) -> dict[str, Any]:
    """`answer`, for a request that arrived at `at` on the webhook's clock, with the API
    server's `?timeout=`."""
    payload, outcome = await rig.webhook.review(review_body(), Arrival(at, api_timeout))
    rig.webhook._observe(outcome, 0.001)
    response: dict[str, Any] = json.loads(payload)["response"]
    return response


async def test_a_request_that_waited_past_its_budget_is_held_without_a_write(rig: Rig) -> None:
    """Issue 37: under overload the API server's request waited 3.6 s before the webhook read
    it. The budget (4 s of the API server's 5) counts from its arrival: too little is left
    to write and answer in time, so the eviction is held, nothing written (a late answer
    would be no answer: failurePolicy Ignore lets the eviction through)."""
    now = [1000.0]
    rig.webhook = clocked(rig, now)
    response = await arrived(rig, at=1000.0 - 3.6)
    assert (response["allowed"], response["status"]["code"]) == (False, 429)
    assert "could not be made before the API server's webhook timeout" in reason_of(response)
    assert "the request waited 3.60s" in reason_of(response)
    assert rig.patcher.patches == []
    assert counted(rig, "false", "budget-spent") == 1
    # The drain client's retry, read at once: written, with no live read first (nothing was
    # sent that could have landed), and the episode is over.
    response = await arrived(rig, at=now[0])
    assert (response["allowed"], response["status"]["code"]) == (False, 429)
    assert len(rig.patcher.patches) == 1
    assert rig.cluster.rereads == 0
    assert rig.webhook._failing == {}


@pytest.mark.parametrize(
    ("api_timeout", "waited", "written"),
    [
        (5.0, 3.4, True),  # 0.6 s left of min(4, 5 - 1)
        (2.0, 0.6, False),  # the API server waits 2 s: 0.4 s left of min(4, 2 - 1)
        (2.0, 0.4, True),
        (None, 3.6, False),  # no ?timeout=: 4 s from the arrival all the same
        (30.0, 3.6, False),  # a longer timeout does not lengthen the 4 s budget
    ],
)
async def test_the_budget_is_the_shorter_of_four_seconds_and_the_api_servers_timeout(
    rig: Rig, api_timeout: float | None, waited: float, written: bool
) -> None:
    now = [1000.0]
    rig.webhook = clocked(rig, now)
    response = await arrived(rig, at=now[0] - waited, api_timeout=api_timeout)
    assert response["allowed"] is False
    assert bool(rig.patcher.patches) is written


async def test_writes_not_sent_for_want_of_time_end_at_the_liveness_bound(rig: Rig) -> None:
    """A controller starved of CPU for --rollout-timeout: held, then allowed (write-timeout)
    with the Warning, as for a Deployment that cannot be written."""
    now = [1000.0]
    rig.webhook = clocked(rig, now, rollout_timeout=timedelta(seconds=60))
    assert (await arrived(rig, at=now[0] - 4.5))["allowed"] is False
    now[0] += 59.0
    assert (await arrived(rig, at=now[0] - 4.5))["allowed"] is False
    now[0] += 1.0
    response = await arrived(rig, at=now[0] - 4.5)
    assert response["allowed"] is True
    assert rig.patcher.patches == []
    assert counted(rig, "true", "write-timeout") == 1


async def test_writes_failing_past_the_rollout_timeout_allow_then_a_success_resets(
    rig: Rig,
) -> None:
    """The liveness bound: held while writes fail for now, allowed once --rollout-timeout has
    passed since the first failure, with the Warning naming the write."""
    clock = [1000.0]
    rig.webhook = EvictionWebhook(
        rig.cluster, rig.patcher, config=DecisionConfig(rollout_timeout=timedelta(seconds=60)),
        events=DrainEvents(ListRecorder()), clock=lambda: NOW, monotonic=lambda: clock[0],
    )  # fmt: skip
    rig.cluster.reread = [DeploymentFound(deployment()) for _ in range(4)]
    rig.patcher.failures = [unavailable(), unavailable(), unavailable()]
    assert (await answer(rig))["allowed"] is False
    clock[0] += 59.0
    assert (await answer(rig))["allowed"] is False
    clock[0] += 1.0
    response = await answer(rig)
    assert response["allowed"] is True
    # the API answers again: the next stamp goes through and holds; the episode is over
    assert (await answer(rig))["allowed"] is False
    assert rig.webhook._failing == {}


@pytest.mark.parametrize(
    ("lookup", "allowed", "reason"),
    [
        (PodGone(), True, Reason.POD_GONE),
        (PodUnavailable("503 ServiceUnavailable"), False, Reason.CACHE_COLD),
    ],
)
async def test_pod_lookup_rows(rig: Rig, lookup: PodLookup, allowed: bool, reason: Reason) -> None:
    rig.cluster.pod = lookup
    response = await answer(rig)
    assert response["allowed"] is allowed
    assert counted(rig, str(allowed).lower(), reason.value) == 1
    assert rig.patcher.patches == []


async def test_dry_run_makes_no_lookup_and_no_patch(rig: Rig) -> None:
    response = await answer(rig, review_body(dryRun=True))
    assert response["allowed"] is True
    assert rig.cluster.lookups == 0
    assert rig.patcher.patches == []


async def test_owner_unresolved_allows(rig: Rig) -> None:
    rig.cluster.replicasets = {}
    response = await answer(rig)
    assert response["allowed"] is True
    assert "ReplicaSet default/web-5d9 not found" in reason_of(response)


async def test_a_bug_in_the_table_allows_with_reason_error(rig: Rig) -> None:
    rig.cluster.deployments = {"web": cast(DeploymentInfo, object())}  # a bug upstream
    response = await answer(rig)
    assert response["allowed"] is True
    assert response["uid"] == UID
    assert "AttributeError" in reason_of(response)
    assert counted(rig, "true", "error") == 1
    assert rig.patcher.patches == []


async def test_a_bug_in_a_lookup_allows_with_reason_error(rig: Rig) -> None:
    rig.cluster.pod = RuntimeError("cache bug")  # type: ignore[assignment]
    response = await answer(rig)
    assert response["allowed"] is True
    assert response["uid"] == UID
    assert "RuntimeError: cache bug" in reason_of(response)
    assert counted(rig, "true", "error") == 1


async def test_held_events_are_rate_limited_per_deployment(rig: Rig) -> None:
    stamped = deployment(restarted_at=NOW - timedelta(seconds=30), restarted_at_raw="x")
    rig.cluster.deployments = {"web": stamped}
    for _ in range(3):
        response = await answer(rig)
        assert response["allowed"] is False
    held = [event for event in rig.events if event.reason == DRAIN_WAITING]
    assert [event.message for event in held] == [
        held_message(POD.ref, "node-a", timedelta(seconds=30))
    ]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"strategy_type": "Recreate", "max_surge": 0}, Reason.CANNOT_SURGE),
        ({"max_unavailable": 1}, Reason.CANNOT_PROTECT),
        ({"enabled_value": "False"}, Reason.ENABLED_ANNOTATION_INVALID),
    ],
)
async def test_a_warning_is_raised_once_per_interval(
    rig: Rig, changes: dict[str, Any], reason: Reason
) -> None:
    rig.cluster.deployments = {"web": deployment(**changes)}
    for _ in range(2):
        assert (await answer(rig))["allowed"] is True
    [warning] = rig.events
    assert (warning.type, warning.reason) == (WARNING, WARNING_EVENT_REASON[reason])
    assert rig.patcher.patches == []


async def test_409_then_a_failed_reread_holds_and_is_counted(rig: Rig) -> None:
    """REREAD_FAILED: the 409 means someone is writing this Deployment right now."""
    rig.patcher.failures = [conflict()]
    rig.cluster.reread = [OwnerUnresolved("live GET of Deployment default/web timed out")]
    response = await answer(rig)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert "could not be read again" in response["status"]["message"]
    assert counted(rig, "false", "reread-failed") == 1
    assert rig.events == []


@pytest.mark.parametrize(
    "changes",
    [
        {"kind": {"group": "policy", "version": "v1", "kind": "DeleteOptions"}},
        {"kind": {"group": "", "version": "v1", "kind": "Pod"}},
        {"name": "web/../../secrets"},
        {"name": "Web"},
    ],
    ids=["DeleteOptions", "core Pod", "slash", "capital"],
)
async def test_a_non_eviction_kind_or_invalid_name_is_allowed_without_lookup(
    rig: Rig, changes: dict[str, Any]
) -> None:
    response = await answer(rig, review_body(**changes))
    assert response["allowed"] is True
    assert rig.cluster.lookups == 0
    assert rig.patcher.patches == []


async def test_a_namespace_out_of_scope_is_allowed_without_lookup_and_counted(rig: Rig) -> None:
    """NAMESPACE_OUT_OF_SCOPE: the live GET would be refused (403) and answer 429 forever
    (CACHE_COLD)."""
    rig.webhook.config = DecisionConfig(namespaces=frozenset({"shop"}))
    rig.cluster.pod = PodUnavailable("403 Forbidden")
    response = await answer(rig)
    assert response["allowed"] is True
    assert rig.cluster.lookups == 0
    assert counted(rig, "true", "namespace-out-of-scope") == 1


async def test_a_failing_event_sink_does_not_change_the_answer(rig: Rig) -> None:
    class Broken:
        def emit(self, event: DrainEvent) -> None:
            raise RuntimeError("event writer bug")

    rig.webhook.events = Broken()
    response = await answer(rig)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)))
async def test_any_body_gets_a_valid_review(rig: Rig, body: bytes) -> None:
    response = await answer(rig, body)
    assert isinstance(response["allowed"], bool)
    assert isinstance(response["uid"], str)


def test_rate_limiter_allows_once_per_interval_and_stays_bounded() -> None:
    now = [0.0]
    limiter = RateLimiter(30, clock=lambda: now[0], max_keys=4)
    assert limiter.allow("a") and not limiter.allow("a")
    now[0] = 29.9
    assert not limiter.allow("a")
    now[0] = 30.0
    assert limiter.allow("a")
    for key in range(10):
        assert limiter.allow(key)
    assert len(limiter._last) <= 4


async def test_answers_are_observed_in_the_next_loop_turn_together_and_in_order(rig: Rig) -> None:
    """`answer` returns before the answer is counted, logged or its events handed over (all
    but the stamp's own, sent with it); the next turn of the loop observes every answer of this
    one, in the order they were given."""
    observed: list[Reason] = []
    observe = rig.webhook._observe

    def recording(outcome: Outcome, seconds: float) -> None:
        observed.append(outcome.decision.reason)
        observe(outcome, seconds)

    rig.webhook._observe = recording  # type: ignore[method-assign]
    first = await rig.webhook.answer(review_body())
    stamped = deployment(restarted_at=NOW - timedelta(seconds=30), restarted_at_raw="x")
    rig.cluster.deployments = {"web": stamped}
    second = await rig.webhook.answer(review_body())
    third = await rig.webhook.answer(review_body(dryRun=True))
    assert [json.loads(body)["response"]["allowed"] for body in (first, second, third)] == [
        False, False, True,
    ]  # fmt: skip
    assert observed == []
    assert counted(rig, "false", "rollout-requested") == 0
    assert [event.reason for event in rig.events] == [DRAIN_STARTED]
    await asyncio.sleep(0)
    assert observed == [Reason.ROLLOUT_REQUESTED, Reason.ROLLOUT_IN_PROGRESS, Reason.DRY_RUN]
    assert counted(rig, "false", "rollout-requested") == 1
    assert counted(rig, "false", "rollout-in-progress") == 1
    assert counted(rig, "true", "dry-run") == 1
    assert [event.reason for event in rig.events] == [DRAIN_STARTED, DRAIN_WAITING]
    await asyncio.sleep(0)
    assert len(observed) == 3  # each answer once


# --- v3: the last Ready pod, and a cold replica ------------------------------------------------


async def test_another_ready_pod_on_a_node_that_stays_lets_the_eviction_through_at_once(
    rig: Rig,
) -> None:
    rig.cluster.deployments = {"web": deployment(replicas=3, ready_replicas=3)}
    rig.cluster.others_ready, rig.cluster.others_elsewhere = 2, 1
    response = await answer(rig)
    assert response["allowed"] is True
    [(_, _, patch)] = rig.patcher.patches  # no rollout: the ledger record only
    assert patch[:2] == [
        {"op": "test", "path": "/metadata/uid", "value": "dep-uid"},
        {"op": "add", "path": "/metadata/resourceVersion", "value": "42"},
    ]
    assert patch[2]["path"] == "/metadata/annotations/graceful-drain.stonal.com~1evictions"
    assert json.loads(patch[2]["value"]) == {
        POD.name: {"uid": POD.uid, "at": "2024-05-01T12:00:00.000000Z"}
    }
    assert counted(rig, "true", "ready-elsewhere") == 1


async def test_a_pod_not_ready_in_the_cache_but_ready_live_is_held(rig: Rig) -> None:
    """The pod cache lags: the pod turned Ready since. Read live, it is the last Ready pod, so
    the eviction is held with a rollout instead of let go as `pod-not-ready`."""
    rig.cluster.pod = PodFound(replace(POD, ready=False))
    rig.cluster.live_pod = PodFound(POD)
    response = await answer(rig)
    assert response["allowed"] is False and response["status"]["code"] == 429
    assert rig.cluster.live_pod_reads == 1
    [(_, _, patch)] = rig.patcher.patches
    assert patch[-1]["path"] == "/metadata/annotations/" + RESTARTED_AT_ANNOTATION.replace(
        "/", "~1"
    )


async def test_a_pod_not_ready_live_too_is_let_go_and_recorded(rig: Rig) -> None:
    rig.cluster.pod = PodFound(replace(POD, ready=False))
    response = await answer(rig)
    assert response["allowed"] is True
    assert rig.cluster.live_pod_reads == 1
    [(_, _, patch)] = rig.patcher.patches  # the ledger record, no rollout
    assert patch[-1]["path"] == "/metadata/annotations/graceful-drain.stonal.com~1evictions"
    assert counted(rig, "true", "pod-not-ready") == 1


async def test_a_conflicting_record_rereads_and_sees_the_other_pod_gone(rig: Rig) -> None:
    """Two replicas counting on each other's pod: the second record gets 409, re-reads, and
    (the other pod now recorded, so not counted) holds with a rollout."""
    rig.cluster.others_elsewhere = 1
    rig.patcher.failures = [conflict()]
    rig.cluster.reread = [DeploymentFound(deployment(resource_version="43"))]
    counts = iter([1, 0])  # the re-read's ledger counts the other pod as gone
    rig.cluster.ready_elsewhere = lambda pod, deployment: next(counts)  # type: ignore[method-assign]
    response = await answer(rig)
    assert response["allowed"] is False
    assert counted(rig, "false", "rollout-requested") == 1
    assert len(rig.patcher.patches) == 2  # the record that conflicted, then the stamp


@pytest.mark.parametrize(("failure", "allowed", "reason"), [
    (unavailable(), False, "write-deferred"),
    (api_error(403), True, "record-failed"),
])  # fmt: skip
async def test_a_failed_record_holds_for_now_and_allows_when_refused(
    rig: Rig, failure: BaseException, allowed: bool, reason: str
) -> None:
    rig.cluster.others_elsewhere = 1
    rig.patcher.failures = [failure]
    response = await answer(rig)
    assert response["allowed"] is allowed
    assert counted(rig, str(allowed).lower(), reason) == 1


async def test_every_other_ready_pod_on_a_drained_node_holds_whatever_the_replicas(
    rig: Rig,
) -> None:
    rig.cluster.deployments = {"web": deployment(replicas=3, ready_replicas=3)}
    rig.cluster.others_ready, rig.cluster.others_elsewhere = 2, 0
    response = await answer(rig)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert len(rig.patcher.patches) == 1  # the one stamp
    assert counted(rig, "false", "rollout-requested") == 1


@pytest.mark.parametrize("missing", ["replicaset", "deployment"])
async def test_a_cold_replica_that_cannot_read_the_owner_answers_429(
    rig: Rig, missing: str
) -> None:
    if missing == "replicaset":
        rig.cluster.replicasets = {}
    else:
        rig.cluster.deployments = {}
    rig.cluster.synced = False
    rig.cluster.live_owner = OwnerUnresolved("live GET failed: connection refused", cold=True)
    response = await answer(rig)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert "has not synced yet" in response["status"]["message"]
    assert rig.patcher.patches == []
    assert counted(rig, "false", "cache-cold") == 1


async def test_a_cold_replica_reads_the_owner_live_and_holds_with_a_rollout(rig: Rig) -> None:
    rig.cluster.deployments = {}
    rig.cluster.synced = False
    rig.cluster.live_owner = DeploymentFound(deployment())
    response = await answer(rig)
    assert response["allowed"] is False
    assert len(rig.patcher.patches) == 1
    assert counted(rig, "false", "rollout-requested") == 1


async def test_a_synced_cache_lacking_the_owner_allows(rig: Rig) -> None:
    rig.cluster.deployments = {}
    response = await answer(rig)
    assert response["allowed"] is True
    assert counted(rig, "true", "owner-unresolved") == 1
