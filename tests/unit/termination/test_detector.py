"""The Detector facade: one client, one deadline, classify; never raises."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from graceful_drain.termination.budget import DEFAULT_DEADLINE_SECONDS, GracePeriodError
from graceful_drain.termination.detector import Detector, DetectorConfig, reads_budget
from graceful_drain.termination.evidence import Trigger, Unavailable, UnavailableReason
from graceful_drain.termination.identity import IdentityError
from graceful_drain.termination.reader import ReadFailure
from graceful_drain.termination.recording import REASON
from graceful_drain.termination.verdict import Action, Cause, Fact, Source, Verdict
from tests.unit.termination.fakes import (
    HANG,
    NAMESPACE,
    FakeReader,
    ReaderFactory,
    forbidden,
    identity,
    pod_obj,
)

NOW = datetime(2026, 11, 11, 12, 0, 0, tzinfo=UTC)


def detector(
    reader: FakeReader | BaseException, config: DetectorConfig | None = None
) -> tuple[Detector, ReaderFactory]:
    factory = ReaderFactory(reader)
    return Detector(identity(), config, reader_factory=factory, now=lambda: NOW), factory


def values(verdict: Verdict, fact: Fact) -> dict[str, str]:
    [item] = [item for item in verdict.evidence if item.fact is fact]
    return dict(item.values)


@pytest.mark.parametrize(
    ("grace", "deadline", "budget"),
    [
        (None, None, 2.0),  # v2: no grace period known yet, an assumed 4 s
        (30, None, DEFAULT_DEADLINE_SECONDS),
        (30, 20.0, 15.0),
        (4, None, 2.0),
        (None, 1.0, 1.0),
        (0, None, 0.0),
    ],
)
def test_budget(grace: int | None, deadline: float | None, budget: float) -> None:
    config = DetectorConfig(grace_period_seconds=grace, deadline_seconds=deadline)
    assert detector(FakeReader(), config)[0].budget_seconds() == budget


def test_reads_keep_back_a_reserve_to_answer() -> None:
    assert reads_budget(5.0) == pytest.approx(4.8)
    assert reads_budget(0.5) == pytest.approx(0.4)
    assert reads_budget(0.0) == 0.0


@pytest.mark.parametrize(
    ("configured", "pod_grace", "used", "informative"),
    [
        (None, 30, 30, "true"),
        (None, 7200, 7200, "false"),  # longer than event retention: absence proves nothing
        (60, 7200, 60, "true"),  # the configured grace period wins
        (7200, 30, 7200, "false"),
    ],
)
async def test_the_grace_period_feeds_the_retention_rule(
    configured: int | None, pod_grace: int, used: int, informative: str
) -> None:
    reader = FakeReader(pod=pod_obj(deleted=True, grace=pod_grace, deletion_grace=pod_grace))
    found, _ = detector(reader, DetectorConfig(grace_period_seconds=configured))
    verdict = await found.detect()
    no_event = values(verdict, Fact.NO_EVICTED_EVENT)
    assert (no_event["grace_period_seconds"], no_event["informative"]) == (str(used), informative)
    # v4: a deletion is voluntary only while an expired Evicted event can be excluded.
    assert verdict.cause is (Cause.VOLUNTARY if informative == "true" else Cause.INDETERMINATE)
    assert reader.closed


async def test_an_unreadable_pod_leaves_the_default_grace_period() -> None:
    found, _ = detector(FakeReader(pod=forbidden()))
    verdict = await found.detect()
    assert values(verdict, Fact.NO_EVICTED_EVENT)["grace_period_seconds"] == "30"


async def test_no_configuration_means_nothing_readable() -> None:
    failure = ReadFailure(UnavailableReason.ERROR, "no usable Kubernetes configuration: x")
    found, factory = detector(failure)
    verdict = await found.detect()
    assert (verdict.cause, verdict.action) == (Cause.INDETERMINATE, Action.SHED_LOAD_AND_EXIT_FAST)
    assert verdict.deciding_item.fact is Fact.CONSERVATIVE_FALLBACK
    assert verdict.deciding_item.detail.startswith("Nothing was readable in time")
    assert values(verdict, Fact.POD_UNAVAILABLE)["error"] == failure.unavailable.detail
    assert len(factory.timeouts) == 1


async def test_a_budget_already_spent_reads_nothing() -> None:
    reader = FakeReader(pod=HANG, events=HANG, node=HANG)
    factory = ReaderFactory(reader)
    found = Detector(identity(), reader_factory=factory, now=lambda: NOW, clock=lambda: 1000.0)
    verdict = await found.detect(started_at=0.0)  # the signal arrived long ago
    assert verdict.cause is Cause.INDETERMINATE
    reasons = {dict(item.values).get("reason") for item in verdict.evidence if item.values}
    assert UnavailableReason.TIMEOUT in reasons
    assert reader.closed


async def test_the_client_timeout_lies_past_the_deadline() -> None:
    found, factory = detector(FakeReader())
    await found.detect()
    assert factory.timeouts[0] > reads_budget(found.budget_seconds())


async def test_after_restart_reports() -> None:
    status = {
        "containerStatuses": [
            {"name": "web", "restartCount": 1,
             "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                          "finishedAt": "2026-11-11T11:59:00Z"}}}
        ]
    }  # fmt: skip
    found, _ = detector(FakeReader(pod=pod_obj(status=status)))
    verdict = await found.detect(Trigger.AFTER_RESTART)
    assert (verdict.cause, verdict.action) == (Cause.OOM_KILLED, Action.REPORT_ONLY)
    assert verdict.decided_by is Source.POD


async def test_record_posts_the_event_in_the_pods_namespace() -> None:
    reader = FakeReader()
    found, _ = detector(reader)
    verdict = await found.detect()
    assert await found.record(verdict) is None
    [(namespace, event)] = reader.created
    assert namespace == NAMESPACE
    assert (event["reason"], event["message"]) == (REASON, verdict.summary())


@pytest.mark.parametrize(
    ("create", "reason"),
    [
        (forbidden("events"), UnavailableReason.FORBIDDEN),
        (HANG, UnavailableReason.TIMEOUT),
        (RuntimeError("boom"), UnavailableReason.ERROR),
    ],
)
async def test_record_failures_are_returned_not_raised(
    create: object, reason: UnavailableReason
) -> None:
    reader = FakeReader(create_event=create)
    found, _ = detector(reader)
    verdict = await found.detect()
    failure = await found.record(verdict, timeout_seconds=0.01)
    assert isinstance(failure, Unavailable) and failure.reason is reason
    assert reader.closed


async def test_record_without_configuration() -> None:
    found, _ = detector(ReadFailure(UnavailableReason.ERROR, "no config"))
    verdict = await found.detect()
    assert await found.record(verdict) == Unavailable(UnavailableReason.ERROR, "no config")


def test_identity_from_the_environment() -> None:
    env = {"POD_NAME": "web-0", "POD_NAMESPACE": "shop", "POD_UID": "u1", "NODE_NAME": "n1"}
    found = Detector.from_environment(env=env)
    assert (found.identity.name, found.identity.uid, found.identity.node_name) == (
        "web-0",
        "u1",
        "n1",
    )
    with pytest.raises(IdentityError):
        Detector.from_environment(env={"POD_NAME": "web-0"})


@pytest.mark.parametrize(
    ("env", "budget"),
    [
        ({}, 2.0),  # an assumed 4 s grace period: safe before the pod is read
        ({"TERMINATION_GRACE_PERIOD_SECONDS": "30"}, DEFAULT_DEADLINE_SECONDS),
        ({"TERMINATION_GRACE_PERIOD_SECONDS": "2"}, 1.0),
        ({"TERMINATION_GRACE_PERIOD_SECONDS": " "}, 2.0),
    ],
)
def test_the_budget_holds_before_the_pod_is_read(env: dict[str, str], budget: float) -> None:
    """Case 9 of v2: with a 30 s default the verdict came after a 4 s grace period's SIGKILL."""
    found = Detector.from_environment(env={"POD_NAME": "web", "POD_NAMESPACE": "shop", **env})
    assert found.budget_seconds() == budget


def test_a_configured_grace_period_wins_over_the_environment() -> None:
    env = {"POD_NAME": "web", "POD_NAMESPACE": "shop", "TERMINATION_GRACE_PERIOD_SECONDS": "2"}
    found = Detector.from_environment(DetectorConfig(grace_period_seconds=30), env=env)
    assert found.budget_seconds() == DEFAULT_DEADLINE_SECONDS


def test_a_bad_grace_period_in_the_environment_fails_at_start_up() -> None:
    env = {"POD_NAME": "web", "POD_NAMESPACE": "shop", "TERMINATION_GRACE_PERIOD_SECONDS": "x"}
    with pytest.raises(GracePeriodError, match="TERMINATION_GRACE_PERIOD_SECONDS='x'"):
        Detector.from_environment(env=env)


def deletion(grace: int, due_in: float) -> dict[str, object]:
    """A pod deleted with `grace` seconds, its deletionTimestamp `due_in` s after NOW."""
    pod = pod_obj(deleted=True, grace=30, deletion_grace=grace)
    due = NOW + timedelta(seconds=due_in)
    pod["metadata"]["deletionTimestamp"] = due.strftime("%Y-%m-%dT%H:%M:%S") + "Z"
    return pod


def timeout_detail(verdict: Verdict) -> str:
    return values(verdict, Fact.EVENTS_UNAVAILABLE)["error"]


@pytest.mark.parametrize(
    ("config", "pod", "budget"),
    [
        # Issue 30: kubectl drain --grace-period 2 of a pod whose detector is configured with
        # the documented 30 s; the events read hangs. Before v3 the deadline stayed at 5 s.
        (DetectorConfig(grace_period_seconds=30), deletion(2, 2), 1.0),
        # a longer requested deadline changes nothing: half the deletion's grace period
        (DetectorConfig(grace_period_seconds=30, deadline_seconds=10), deletion(2, 2), 1.0),
        # less left until deletionTimestamp than the deletion's grace period: that bounds it
        (DetectorConfig(grace_period_seconds=30), deletion(30, 1), 0.5),
        # the configured grace period stays a bound when the pod's is longer
        (DetectorConfig(grace_period_seconds=4), deletion(30, 30), 2.0),
        # deletionTimestamp already passed: answer with what was read, at once
        (DetectorConfig(grace_period_seconds=30), deletion(30, -5), 0.0),
    ],
)
async def test_the_deletion_bounds_the_deadline_whatever_is_configured(
    config: DetectorConfig, pod: dict[str, object], budget: float
) -> None:
    reader = FakeReader(pod=pod, events=HANG)
    found, _ = detector(reader, config)
    before = found.budget_seconds()
    verdict = await found.detect()
    # The bound counts from the detection's start: the pod read's own (tiny) time is added.
    assert found.budget_seconds() == pytest.approx(budget, abs=0.05)
    assert found.budget_seconds() <= before
    within = re.search(
        r"no answer within the ([0-9.]+)s detection deadline", timeout_detail(verdict)
    )
    assert within is not None
    assert float(within.group(1)) == pytest.approx(reads_budget(budget), abs=0.05)
    # v4: the pod reads as deleted, but the events read was cut: cannot determine, shed
    assert verdict.cause is Cause.INDETERMINATE
    assert verdict.deciding_item.fact is Fact.CANNOT_DETERMINE
    assert reader.cancelled == ["events"]


async def test_a_new_detection_starts_from_the_configured_bound_again() -> None:
    found, _ = detector(FakeReader(pod=deletion(2, 2)), DetectorConfig(grace_period_seconds=30))
    await found.detect()
    assert found.budget_seconds() <= 1.0
    found._reader_factory = ReaderFactory(FakeReader(pod=forbidden()))
    await found.detect()
    assert found.budget_seconds() == DEFAULT_DEADLINE_SECONDS
