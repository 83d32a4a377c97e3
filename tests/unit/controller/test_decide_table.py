"""The decision table of docs/decisions.md, reason by reason, and the order in which they are tried,
under `--protect=single-replica` (v2's rule: `replicas-not-one`, `surge-ready` from the status
and the pod cache). The v3 rule (`--protect=last-ready`, the default) has its own table and
property in test_decide_v3.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import cast

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.lookups import (
    DeploymentFound,
    NoDeployment,
    OwnerLookup,
    OwnerUnresolved,
    PodFound,
    PodGone,
    PodLookup,
    PodOutOfScope,
    PodUnavailable,
    resolve_owner,
)
from graceful_drain.controller.decision.model import (
    DeploymentInfo,
    ObjectRef,
    PodInfo,
    ReplicaSetInfo,
)
from graceful_drain.controller.decision.reasons import DENYING_REASONS, Decision, Reason
from graceful_drain.controller.decision.request import EvictionRequest
from graceful_drain.controller.decision.stamp import (
    MAX_DECIDE_ATTEMPTS,
    FollowUp,
    RecordIntent,
    WriteFailure,
    classify_write_failure,
    stamp_patch,
)
from graceful_drain.controller.decision.table import (
    DecisionConfig,
    Protect,
    after_write_failure,
    decide,
    precheck,
    reread_failed,
    unexpected_error,
)

from .objects import DEPLOYMENT, ENABLED, NOW, POD, REQUEST

FOUND: PodLookup = PodFound(POD)
OWNED: OwnerLookup = DeploymentFound(DEPLOYMENT)
DEFAULT_CONFIG = DecisionConfig(protect=Protect.SINGLE_REPLICA)


@dataclass(frozen=True)
class Scenario:
    """Everything decide() reads. The base matches nothing before ROLLOUT_REQUESTED."""

    request: EvictionRequest = REQUEST
    pod: PodLookup = FOUND
    owner: OwnerLookup = OWNED
    config: DecisionConfig = DEFAULT_CONFIG
    now: datetime = NOW

    def decide(self) -> Decision:
        return decide(self.request, self.pod, self.owner, self.config, self.now)

    def with_request(self, **changes: object) -> Scenario:
        return replace(self, request=msgspec.structs.replace(self.request, **changes))

    def with_pod(self, **changes: object) -> Scenario:
        # Pod changes only make sense while the pod is found: triggers are applied from the
        # last step tried up, so POD_GONE / CACHE_COLD replace the lookup after these ran.
        assert isinstance(self.pod, PodFound)
        return replace(self, pod=PodFound(replace(self.pod.pod, **changes)))  # type: ignore[arg-type]

    def with_deployment(self, **changes: object) -> Scenario:
        assert isinstance(self.owner, DeploymentFound)
        deployment = replace(self.owner.deployment, **changes)  # type: ignore[arg-type]
        return replace(self, owner=DeploymentFound(deployment))

    def restarted(self, ago: timedelta, *, copied: bool = False) -> Scenario:
        stamp = self.now - ago
        raw = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        if not copied:
            return self.with_deployment(restarted_at=stamp, restarted_at_raw=raw)
        # Copied into the template: a new generation the Deployment controller is rolling out.
        return self.with_deployment(
            restarted_at=stamp, restarted_at_raw=raw, template_restarted_at=raw, generation=4
        )

    def configured(self, **changes: object) -> Scenario:
        return replace(self, config=replace(self.config, **changes))  # type: ignore[arg-type]


Trigger = Callable[[Scenario], Scenario]

# The order in which the table tries its reasons: docs/decisions.md's order. The reasons of
# one step are the outcomes of one check; their triggers are never combined below.
STEPS: tuple[tuple[Reason, ...], ...] = (
    (Reason.DRY_RUN,),
    (Reason.NOT_EVICTION, Reason.INVALID_NAME),
    (Reason.POD_GONE, Reason.NAMESPACE_OUT_OF_SCOPE),
    (Reason.CACHE_COLD,),
    (Reason.POD_TERMINATING,),
    (Reason.UID_MISMATCH,),
    (Reason.NO_DEPLOYMENT, Reason.OWNER_UNRESOLVED),
    (Reason.DEPLOYMENT_DELETING,),
    (Reason.ENABLED_ANNOTATION_INVALID, Reason.OPTED_OUT, Reason.NOT_ENABLED),
    (Reason.REPLICAS_NOT_ONE, Reason.READY_ELSEWHERE),  # READY_ELSEWHERE: test_decide_v3.py
    (Reason.CANNOT_SURGE, Reason.CANNOT_PROTECT),
    (Reason.POD_NOT_READY,),
    (Reason.SURGE_READY,),
    (Reason.ROLLOUT_TIMEOUT,),
    (Reason.ROLLOUT_IN_PROGRESS,),
    # the base scenario, and what its write may come to (test_write_failure_rule)
    (
        Reason.ROLLOUT_REQUESTED,
        Reason.REREAD_FAILED,
        Reason.WRITE_DEFERRED,
        Reason.BUDGET_SPENT,
        Reason.WRITE_TIMEOUT,
        Reason.STAMP_FAILED,
        Reason.RECORD_FAILED,
    ),
)
# Outside the table's order: what the webhook answers when it cannot walk the table.
OUTSIDE_THE_TABLE = (Reason.ERROR, Reason.MALFORMED_REVIEW)
# A rollout of ours keeps holding (ROLLOUT_TIMEOUT, ROLLOUT_IN_PROGRESS set restarted-at):
# these do not win over it, see the cannot-surge tests and
# test_our_rollout_keeps_holding_whatever_the_replicas.
HELD_BY_OUR_ROLLOUT = frozenset(
    {Reason.REPLICAS_NOT_ONE, Reason.CANNOT_SURGE, Reason.CANNOT_PROTECT}
)

# One way to make each reason's check match; reasons with several situations list them all.
TRIGGERS: dict[Reason, dict[str, Trigger]] = {
    Reason.DRY_RUN: {
        "request.dryRun": lambda s: s.with_request(dry_run=True),
        "deleteOptions.dryRun": lambda s: s.with_request(options_dry_run=True),
    },
    Reason.NOT_EVICTION: {
        "DELETE pods": lambda s: s.with_request(operation="DELETE", sub_resource=""),
        "CREATE pods": lambda s: s.with_request(sub_resource=""),
        "UPDATE eviction": lambda s: s.with_request(operation="UPDATE"),
        "other group": lambda s: s.with_request(group="apps"),
        "other resource": lambda s: s.with_request(resource="deployments"),
        "kind not Eviction": lambda s: s.with_request(kind="DeleteOptions"),
        "kind group not policy": lambda s: s.with_request(kind_group="apps"),
        "no kind": lambda s: s.with_request(kind_group="", kind=""),
    },
    Reason.INVALID_NAME: {
        "name with a slash": lambda s: s.with_request(name="web/../../secrets"),
        "name with capitals": lambda s: s.with_request(name="Web-5d9"),
        "empty name": lambda s: s.with_request(name=""),
        "namespace not a label": lambda s: s.with_request(namespace="a.b"),
    },
    Reason.POD_GONE: {"live GET 404": lambda s: replace(s, pod=PodGone())},
    Reason.NAMESPACE_OUT_OF_SCOPE: {
        "namespace out of scope": lambda s: s.configured(namespaces=frozenset({"other"})),
        "not looked up": lambda s: replace(
            s.configured(namespaces=frozenset({"other"})), pod=PodOutOfScope()
        ),
    },
    Reason.CACHE_COLD: {
        "live GET failed": lambda s: replace(s, pod=PodUnavailable("connection refused"))
    },
    Reason.POD_TERMINATING: {
        "terminating": lambda s: s.with_pod(terminating=True),
        "Succeeded": lambda s: s.with_pod(phase="Succeeded"),
        "Failed": lambda s: s.with_pod(phase="Failed"),
    },
    Reason.UID_MISMATCH: {
        "other uid": lambda s: s.with_request(precondition_uid="someone-else"),
        "empty uid": lambda s: s.with_request(precondition_uid=""),
    },
    Reason.NO_DEPLOYMENT: {
        "StatefulSet": lambda s: replace(s, owner=NoDeployment("controlled by a StatefulSet")),
    },
    Reason.OWNER_UNRESOLVED: {
        "unresolved": lambda s: replace(s, owner=OwnerUnresolved("ReplicaSet not found")),
    },
    Reason.DEPLOYMENT_DELETING: {"deleting": lambda s: s.with_deployment(deleting=True)},
    Reason.NOT_ENABLED: {
        "opt-in, annotation absent": lambda s: s.configured(enabled_annotation=ENABLED),
    },
    Reason.OPTED_OUT: {
        "opt-in, annotation false": lambda s: s.configured(
            enabled_annotation=ENABLED
        ).with_deployment(enabled_value="false"),
        "opt-out false": lambda s: s.with_deployment(enabled_value="false"),
        "opt-out false, opt-in key": lambda s: s.configured(
            enabled_annotation="example.com/protect"
        ).with_deployment(enabled_value="false"),
    },
    Reason.ENABLED_ANNOTATION_INVALID: {
        "invalid False": lambda s: s.with_deployment(enabled_value="False"),
        "invalid empty": lambda s: s.with_deployment(enabled_value=""),
        "invalid yes, opt-in": lambda s: s.configured(enabled_annotation=ENABLED).with_deployment(
            enabled_value="yes"
        ),
    },
    Reason.REPLICAS_NOT_ONE: {
        "3 replicas": lambda s: s.with_deployment(replicas=3),
        "0 replicas": lambda s: s.with_deployment(replicas=0),
        "malformed replicas": lambda s: s.with_deployment(replicas=None),
    },
    Reason.CANNOT_SURGE: {
        "Recreate": lambda s: s.with_deployment(strategy_type="Recreate", max_surge=0),
        "maxSurge 0": lambda s: s.with_deployment(max_surge=0),
        "paused": lambda s: s.with_deployment(paused=True),
    },
    Reason.CANNOT_PROTECT: {
        "maxUnavailable 1": lambda s: s.with_deployment(max_unavailable=1),
    },
    Reason.POD_NOT_READY: {"pod not Ready": lambda s: s.with_pod(ready=False)},
    Reason.SURGE_READY: {
        "2 ready": lambda s: s.with_deployment(ready_replicas=2),
        "3 ready": lambda s: s.with_deployment(ready_replicas=3),
    },
    Reason.ROLLOUT_TIMEOUT: {
        "11m ago": lambda s: s.restarted(timedelta(minutes=11)),
        "exactly 10m ago": lambda s: s.restarted(timedelta(minutes=10)),
        "beyond the timeout in the future": lambda s: s.restarted(-timedelta(minutes=11)),
    },
    Reason.ROLLOUT_IN_PROGRESS: {
        "42s ago": lambda s: s.restarted(timedelta(seconds=42)),
        "slightly in the future": lambda s: s.restarted(-timedelta(seconds=3)),
        "9m59s ago": lambda s: s.restarted(timedelta(minutes=9, seconds=59)),
    },
}
CASES = [(reason, name) for reason, triggers in TRIGGERS.items() for name in triggers]
CASE_IDS = [f"{reason.value}-{name}" for reason, name in CASES]
# The steps with triggers: every one but the base scenario's, the last.
TRIGGERED_STEPS = range(len(STEPS) - 1)


def step_of(reason: Reason) -> int:
    return next(index for index, step in enumerate(STEPS) if reason in step)


def step_triggers(step: int) -> list[tuple[Reason, Trigger]]:
    return [(reason, trigger) for reason in STEPS[step]
            for trigger in TRIGGERS.get(reason, {}).values()]  # fmt: skip


def later_steps(reason: Reason) -> set[int]:
    """The steps `reason`'s is tried before and wins over, the base scenario's excepted."""
    step = step_of(reason)
    end = step_of(Reason.ROLLOUT_TIMEOUT if reason in HELD_BY_OUR_ROLLOUT else
                  Reason.ROLLOUT_REQUESTED)  # fmt: skip
    return set(range(step + 1, end))


def apply(
    scenario: Scenario, steps: set[int], chosen: dict[int, Trigger] | None = None
) -> Scenario:
    """Apply a trigger of each of `steps`, the last tried first (see Scenario.with_pod)."""
    for step in sorted(steps, reverse=True):
        trigger = (chosen or {}).get(step) or step_triggers(step)[0][1]
        scenario = trigger(scenario)
    return scenario


def test_the_base_scenario_requests_a_rollout() -> None:
    decision = Scenario().decide()

    assert decision.reason is Reason.ROLLOUT_REQUESTED
    assert not decision.allowed
    assert decision.stamp is not None
    assert decision.stamp.deployment == DEPLOYMENT
    assert decision.stamp.value == "2024-05-01T12:00:00.000000Z"


@pytest.mark.parametrize(("reason", "situation"), CASES, ids=CASE_IDS)
def test_each_reason_alone(reason: Reason, situation: str) -> None:
    decision = TRIGGERS[reason][situation](Scenario()).decide()

    assert decision.reason is reason
    assert decision.allowed is (reason not in DENYING_REASONS)
    assert decision.stamp is None
    assert decision.message.startswith("graceful-drain: ")


@pytest.mark.parametrize(("reason", "situation"), CASES, ids=CASE_IDS)
def test_each_reason_wins_over_every_later_one(reason: Reason, situation: str) -> None:
    step = step_of(reason)
    scenario = apply(Scenario(), later_steps(reason) | {step},
                     {step: TRIGGERS[reason][situation]})  # fmt: skip

    assert scenario.decide().reason is reason


@given(st.sets(st.sampled_from(TRIGGERED_STEPS)), st.data())
def test_the_first_matching_step_wins(steps: set[int], data: st.DataObject) -> None:
    first = min(steps, default=None)
    chosen = {step: data.draw(st.sampled_from(step_triggers(step))) for step in steps}
    # REPLICAS_NOT_ONE's and CANNOT_SURGE's exemption: a rollout of ours keeps holding
    assume(first is None or not (
        set(STEPS[first]) & HELD_BY_OUR_ROLLOUT
        and steps & {step_of(Reason.ROLLOUT_TIMEOUT), step_of(Reason.ROLLOUT_IN_PROGRESS)}
    ))  # fmt: skip

    decision = apply(Scenario(), steps, {step: chosen[step][1] for step in steps}).decide()

    assert decision.reason is (Reason.ROLLOUT_REQUESTED if first is None else chosen[first][0])


def test_a_bug_raises_for_the_one_catch_all_to_answer() -> None:
    """decide() has no catch-all of its own: the webhook's (test_webhook_loop) answers a bug
    `Reason.ERROR`, and `plan` reports it instead of predicting an answer."""
    broken = DeploymentFound(cast(DeploymentInfo, object()))  # a bug upstream of decide()
    with pytest.raises(AttributeError):
        replace(Scenario(), owner=broken).decide()


def test_error_for_errors_raised_by_the_caller() -> None:
    decision = unexpected_error(REQUEST, TimeoutError("cache lookup timed out"))

    assert decision.allowed and decision.reason is Reason.ERROR
    assert decision.message == (
        "graceful-drain: unexpected error for pod default/web-5d9-abcde "
        "(TimeoutError: cache lookup timed out); allowing the eviction"
    )


def test_precheck_is_dry_run_not_eviction_and_invalid_name_only() -> None:
    assert precheck(REQUEST) is None
    dry = precheck(msgspec.structs.replace(REQUEST, dry_run=True))
    assert dry is not None and dry.reason is Reason.DRY_RUN
    other = precheck(msgspec.structs.replace(REQUEST, operation="DELETE"))
    assert other is not None and other.reason is Reason.NOT_EVICTION


@pytest.mark.parametrize(("reason", "situation"), CASES, ids=CASE_IDS)
def test_prechecked_decides_as_decide_once_precheck_lets_the_request_through(
    reason: Reason, situation: str
) -> None:
    """The webhook runs precheck before its lookups and then tells decide it did."""
    scenario = TRIGGERS[reason][situation](Scenario())
    full = scenario.decide()
    if precheck(scenario.request) is not None:
        return  # the webhook answers these before any lookup
    prechecked = decide(scenario.request, scenario.pod, scenario.owner, scenario.config,
                        scenario.now, prechecked=True)  # fmt: skip
    assert prechecked == full
    assert (prechecked.reason, prechecked.message) == (full.reason, full.message)


def test_a_message_is_rendered_once_when_first_read() -> None:
    calls: list[int] = []

    def render() -> str:
        calls.append(1)
        return "graceful-drain: rendered"

    lazy = Decision(True, Reason.SURGE_READY, render)
    assert calls == []
    assert lazy.message == lazy.message == "graceful-drain: rendered"
    assert calls == [1]
    assert lazy == Decision(True, Reason.SURGE_READY, "graceful-drain: rendered")
    assert lazy != Decision(True, Reason.SURGE_READY, "graceful-drain: other")
    assert "graceful-drain: rendered" in repr(lazy)


def test_every_reason_has_its_place_in_the_table_order() -> None:
    placed = [reason for step in STEPS for reason in step] + list(OUTSIDE_THE_TABLE)
    assert sorted(placed) == sorted(Reason)  # each exactly once
    assert set(TRIGGERS) <= set(placed)
    denying = {
        Reason.CACHE_COLD,
        Reason.ROLLOUT_IN_PROGRESS,
        Reason.ROLLOUT_REQUESTED,
        Reason.REREAD_FAILED,
        Reason.WRITE_DEFERRED,
        Reason.BUDGET_SPENT,
    }
    assert denying == DENYING_REASONS


# --- messages ---------------------------------------------------------------------------------


def test_rollout_in_progress_message_names_the_deployment_and_the_wait() -> None:
    decision = Scenario().restarted(timedelta(seconds=42)).decide()

    assert decision.message == (
        "graceful-drain: waiting for a replacement of Deployment default/web to become Ready "
        "on another node (rollout requested 42s ago, gives up after 10m0s)"
    )
    assert decision.deployment == ObjectRef("default", "web")
    assert decision.waited == timedelta(seconds=42)


def test_rollout_requested_message_uses_the_configured_timeout() -> None:
    scenario = replace(Scenario(), config=DecisionConfig(rollout_timeout=timedelta(minutes=3)))

    decision = scenario.decide()

    assert decision.message == (
        "graceful-drain: waiting for a replacement of Deployment default/web to become Ready "
        "on another node (rollout requested 0s ago, gives up after 3m0s)"
    )
    assert decision.waited == timedelta(0)


def test_cache_cold_denial_names_the_pod() -> None:
    decision = replace(Scenario(), pod=PodUnavailable("connection\nrefused")).decide()

    assert not decision.allowed
    assert decision.deployment is None
    assert decision.message == (
        "graceful-drain: pod default/web-5d9-abcde is not in the controller's cache yet and "
        "could not be read (connection refused); retry shortly"
    )


def test_timeout_reports_how_long_it_waited() -> None:
    decision = Scenario().restarted(timedelta(minutes=12, seconds=5)).decide()

    assert decision.waited == timedelta(minutes=12, seconds=5)
    assert "after 12m5s (rolloutTimeout 10m0s)" in decision.message


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"strategy_type": "Recreate", "max_surge": 0}, "spec.strategy.type is Recreate"),
        ({"max_surge": 0}, "spec.strategy.rollingUpdate.maxSurge resolves to 0; set it to 1"),
        ({"paused": True}, "spec.paused is true"),
        (
            {"max_unavailable": 1},
            "spec.strategy.rollingUpdate.maxUnavailable resolves to 1 for 1 spec.replicas, so "
            "the rollout may remove the last Ready pod before a replacement is Ready; set it "
            "to 0",
        ),
    ],
)
def test_cannot_surge_asks_for_a_warning_event_naming_the_field_to_change(
    changes: dict[str, object], field: str
) -> None:
    decision = Scenario().with_deployment(**changes).decide()

    assert decision.allowed and decision.warning_event
    assert field in decision.message


def test_only_the_warning_reasons_ask_for_a_warning_event() -> None:
    for reason, situation in CASES:
        decision = TRIGGERS[reason][situation](Scenario()).decide()
        warned = reason in (Reason.CANNOT_SURGE, Reason.CANNOT_PROTECT,
                            Reason.ENABLED_ANNOTATION_INVALID, Reason.WRITE_DEFERRED,
                            Reason.WRITE_TIMEOUT, Reason.STAMP_FAILED,
                            Reason.RECORD_FAILED)  # fmt: skip
        assert decision.warning_event is warned, (reason, situation)


# --- SURGE_READY: the status and the pod cache agree -------------------------------------------


@pytest.mark.parametrize(
    ("ready_replicas", "others_ready", "stamped", "expected"),
    [
        (2, 1, False, Reason.SURGE_READY),  # the replacement is there
        (3, 2, False, Reason.SURGE_READY),
        (2, 0, False, Reason.ROLLOUT_REQUESTED),  # the status still counts a pod that is gone
        (2, 0, True, Reason.ROLLOUT_IN_PROGRESS),  # ... during our rollout: hold on
        (1, 1, False, Reason.ROLLOUT_REQUESTED),  # a pod the status does not count yet
    ],
)
def test_surge_ready_needs_the_replacement_in_the_pod_cache_too(
    ready_replicas: int, others_ready: int, stamped: bool, expected: Reason
) -> None:
    scenario = Scenario().with_deployment(ready_replicas=ready_replicas)
    if stamped:
        scenario = scenario.restarted(timedelta(seconds=5), copied=True)
    seen: list[tuple[str, str]] = []

    def ready_besides(pod: PodInfo, deployment: DeploymentInfo) -> int:
        seen.append((pod.name, deployment.name))
        return others_ready

    decision = decide(scenario.request, scenario.pod, scenario.owner, scenario.config,
                      scenario.now, ready_besides=ready_besides)  # fmt: skip
    assert decision.reason is expected
    assert decision.allowed is (expected is Reason.SURGE_READY)
    assert seen == ([(POD.name, DEPLOYMENT.name)] if ready_replicas >= 2 else [])


# --- CANNOT_SURGE v2: a rollout of ours keeps holding -----------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"paused": True},
        {"max_unavailable": 1},
        {"strategy_type": "Recreate", "max_surge": 0},
        {"max_surge": 0},
    ],
    ids=["paused", "maxUnavailable 1", "Recreate", "maxSurge 0"],
)
def test_cannot_surge_does_not_apply_to_a_rollout_we_started(changes: dict[str, object]) -> None:
    started = Scenario().restarted(timedelta(seconds=4), copied=True).with_deployment(**changes)

    decision = started.decide()

    assert decision.reason is Reason.ROLLOUT_IN_PROGRESS
    assert not decision.allowed
    surged = started.with_deployment(ready_replicas=2).decide()
    assert surged.reason is Reason.SURGE_READY
    expired = Scenario().restarted(timedelta(minutes=11), copied=True).with_deployment(**changes)
    assert expired.decide().reason is Reason.ROLLOUT_TIMEOUT


def test_cannot_surge_applies_to_a_paused_deployment_whose_stamp_was_never_copied() -> None:
    """No rollout was started and a paused Deployment will not start one: nothing to hold."""
    never_started = Scenario().restarted(timedelta(seconds=4)).with_deployment(paused=True)

    assert never_started.decide().reason is Reason.CANNOT_SURGE


def test_a_finished_drains_kept_stamp_holds_nothing_and_a_new_drain_restamps() -> None:
    """After completion the stamp stays for the old pod's grace period (the detector's
    evidence); an eviction meanwhile starts a fresh rollout, replacing it and completed-at."""
    rolling = Scenario().restarted(timedelta(seconds=20), copied=True)
    finished = rolling.with_deployment(observed_generation=4)
    kept = finished.with_deployment(completed_at_raw="2024-05-01T11:59:50.000000Z")

    decision = kept.decide()

    assert decision.reason is Reason.ROLLOUT_REQUESTED
    assert decision.stamp is not None
    assert decision.stamp.patch[-1] == {
        "op": "remove",
        "path": "/metadata/annotations/graceful-drain.stonal.com~1completed-at",
    }
    # Complete but completed-at not yet written: the same.
    assert finished.decide().reason is Reason.ROLLOUT_REQUESTED
    # Under way (not complete): held.
    assert rolling.decide().reason is Reason.ROLLOUT_IN_PROGRESS


def test_a_naive_now_is_taken_as_utc() -> None:
    scenario = replace(Scenario().restarted(timedelta(seconds=5)), now=NOW.replace(tzinfo=None))

    assert scenario.decide().waited == timedelta(seconds=5)


# --- ROLLOUT_REQUESTED: the stamp patch and its retry rule ------------------------------------


def test_stamp_patch_adds_the_annotation_guarded_by_uid_and_resource_version() -> None:
    assert stamp_patch(DEPLOYMENT, NOW) == [
        {"op": "test", "path": "/metadata/uid", "value": "dep-uid"},
        {"op": "add", "path": "/metadata/resourceVersion", "value": "42"},
        {
            "op": "add",
            "path": "/metadata/annotations/graceful-drain.stonal.com~1restarted-at",
            "value": "2024-05-01T12:00:00.000000Z",
        },
    ]


def test_stamp_patch_creates_the_annotations_map_when_there_is_none() -> None:
    deployment = replace(DEPLOYMENT, has_annotations=False)

    assert stamp_patch(deployment, NOW + timedelta(microseconds=999_999))[-1] == {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {"graceful-drain.stonal.com/restarted-at": "2024-05-01T12:00:00.999999Z"},
    }


def test_stamp_patch_without_a_resource_version_has_no_precondition_on_it() -> None:
    ops = stamp_patch(replace(DEPLOYMENT, resource_version=""), NOW)

    assert [op["path"] for op in ops] == [
        "/metadata/uid",
        "/metadata/annotations/graceful-drain.stonal.com~1restarted-at",
    ]


def test_the_stamp_intent_carries_the_patch() -> None:
    decision = Scenario().decide()

    assert decision.stamp is not None
    assert decision.stamp.patch == stamp_patch(DEPLOYMENT, NOW)


def test_stamp_replaces_a_malformed_restarted_at() -> None:
    malformed = Scenario().with_deployment(restarted_at=None, restarted_at_raw="yesterday")

    decision = malformed.decide()

    assert decision.reason is Reason.ROLLOUT_REQUESTED
    assert decision.stamp is not None
    assert decision.stamp.patch[-1]["op"] == "add"  # add replaces an existing member


REQUESTED = Scenario().decide()


TIMEOUT = DecisionConfig().rollout_timeout


@pytest.mark.parametrize(
    ("status", "attempt", "failing_for", "expected"),
    [
        (409, 1, None, FollowUp.REREAD_AND_DECIDE),
        (409, MAX_DECIDE_ATTEMPTS - 1, None, FollowUp.REREAD_AND_DECIDE),
        (409, MAX_DECIDE_ATTEMPTS, None, Reason.WRITE_DEFERRED),  # contention: held, never allowed
        (None, 1, timedelta(0), Reason.WRITE_DEFERRED),  # timed out, connection reset
        (429, 1, timedelta(0), Reason.WRITE_DEFERRED),  # API Priority and Fairness
        (500, 1, timedelta(seconds=30), Reason.WRITE_DEFERRED),
        (503, 2, TIMEOUT - timedelta(microseconds=1), Reason.WRITE_DEFERRED),
        (504, 1, TIMEOUT, Reason.WRITE_TIMEOUT),  # the liveness bound
        (503, 1, TIMEOUT * 3, Reason.WRITE_TIMEOUT),
        (422, 1, None, Reason.STAMP_FAILED),  # refused for good: a misconfiguration
        (404, 1, None, Reason.STAMP_FAILED),
        (403, 1, None, Reason.STAMP_FAILED),
        (400, 1, None, Reason.STAMP_FAILED),
    ],
)
def test_write_failure_rule(
    status: int | None, attempt: int, failing_for: timedelta | None, expected: object
) -> None:
    failure = classify_write_failure(status)
    follow_up = after_write_failure(REQUESTED, failure, status=status, attempt=attempt,
                                    failing_for=failing_for, rollout_timeout=TIMEOUT)  # fmt: skip

    if expected is FollowUp.REREAD_AND_DECIDE:
        assert follow_up is FollowUp.REREAD_AND_DECIDE
        return
    assert isinstance(follow_up, Decision)
    assert follow_up.reason is expected
    assert follow_up.allowed is (expected is not Reason.WRITE_DEFERRED)
    assert follow_up.warning_event
    assert follow_up.deployment == ObjectRef("default", "web")
    assert follow_up.write is None


@pytest.mark.parametrize(
    ("failing_for", "expected"),
    [
        (timedelta(0), Reason.BUDGET_SPENT),  # held: nothing was written, never allowed
        (TIMEOUT - timedelta(microseconds=1), Reason.BUDGET_SPENT),
        (TIMEOUT, Reason.WRITE_TIMEOUT),  # the same liveness bound as a write failing for now
    ],
)
def test_a_write_not_sent_for_want_of_time_holds_until_the_liveness_bound(
    failing_for: timedelta, expected: Reason
) -> None:
    """`budget-spent`: the webhook had too little of the API server's timeout left to write;
    the eviction is held (no Warning event: the Deployment is not what failed), and counts
    toward --rollout-timeout like a write that failed for now."""
    follow_up = after_write_failure(
        REQUESTED, WriteFailure.UNSENT, status=None, attempt=1, detail="0.20s left",
        failing_for=failing_for, rollout_timeout=TIMEOUT,
    )  # fmt: skip

    assert isinstance(follow_up, Decision)
    assert follow_up.reason is expected
    assert follow_up.allowed is (expected is Reason.WRITE_TIMEOUT)
    assert follow_up.warning_event is (expected is Reason.WRITE_TIMEOUT)
    assert "not sent: 0.20s left" in follow_up.message
    assert follow_up.write is None


def test_a_refused_record_allows_as_record_failed() -> None:
    """The ledger write of READY_ELSEWHERE, refused: the same rule, its own reason."""
    allowed = Decision(True, Reason.READY_ELSEWHERE, "x", deployment=ObjectRef("default", "web"),
                       record=RecordIntent(DEPLOYMENT, "web-1", "uid-1", NOW))  # fmt: skip
    refused = after_write_failure(allowed, WriteFailure.DEFINITE, status=403, attempt=1)
    deferred = after_write_failure(allowed, WriteFailure.TRANSIENT, status=503, attempt=1)

    assert isinstance(refused, Decision) and isinstance(deferred, Decision)
    assert (refused.reason, refused.allowed) == (Reason.RECORD_FAILED, True)
    assert (deferred.reason, deferred.allowed) == (Reason.WRITE_DEFERRED, False)
    assert "eviction record (ledger) on Deployment default/web" in refused.message


@given(st.one_of(st.none(), st.integers(100, 599)))
def test_only_a_conflict_a_transient_or_a_refusal(status: int | None) -> None:
    """Every answer is classified; 429 and 5xx and no answer never allow at once."""
    failure = classify_write_failure(status)
    if status == 409:
        assert failure is WriteFailure.CONFLICT
    elif status is None or status == 429 or status >= 500:
        assert failure is WriteFailure.TRANSIENT
    else:
        assert failure is WriteFailure.DEFINITE


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        # kube-apiserver's answer when the JSON patch does not apply to the stored object (a
        # `remove` of a completed-at the reconciler just cleared, a failed uid `test`): the
        # Deployment moved under the decision, so it is read again, never allowed unwritten.
        (
            422,
            "the server rejected our request due to an error in our request",
            WriteFailure.CONFLICT,
        ),
        (
            422,
            'Deployment.apps "web" is invalid: metadata.annotations: Too long',
            WriteFailure.DEFINITE,
        ),
        (422, None, WriteFailure.DEFINITE),
        (409, None, WriteFailure.CONFLICT),
        (
            400,
            "the server rejected our request due to an error in our request",
            WriteFailure.DEFINITE,
        ),
    ],
)
def test_a_patch_that_no_longer_applies_is_a_conflict(
    status: int, message: str | None, expected: WriteFailure
) -> None:
    assert classify_write_failure(status, message) is expected


def test_write_failure_messages() -> None:
    stamp = after_write_failure(REQUESTED, WriteFailure.DEFINITE, status=403, attempt=1,
                                detail="forbidden")  # fmt: skip
    held = after_write_failure(REQUESTED, WriteFailure.TRANSIENT, status=503, attempt=1,
                               detail="etcd timeout", failing_for=timedelta(minutes=4),
                               rollout_timeout=timedelta(minutes=10))  # fmt: skip

    assert isinstance(stamp, Decision) and isinstance(held, Decision)
    assert stamp.message == (
        "graceful-drain: could not request a rollout: the rollout request (restarted-at) on "
        "Deployment default/web was refused (HTTP 403: forbidden); allowing the eviction"
    )
    assert held.message == (
        "graceful-drain: the rollout request (restarted-at) on Deployment default/web failed "
        "for now (HTTP 503: etcd timeout); the eviction is held and the controller will retry, "
        "for at most 6m0s more"
    )


def test_a_failed_reread_after_a_conflict_holds_the_eviction() -> None:
    """REREAD_FAILED: the 409 says someone is changing this Deployment right now (most likely
    another replica stamping it); letting the pod go would lose its replacement."""
    decision = reread_failed(REQUESTED, "live GET of Deployment default/web timed out")

    assert not decision.allowed
    assert decision.reason is Reason.REREAD_FAILED
    assert decision.deployment == ObjectRef("default", "web")
    assert decision.message == (
        "graceful-drain: Deployment default/web changed while it was being written and could "
        "not be read again (live GET of Deployment default/web timed out); retry shortly"
    )


def test_the_waited_time_keeps_sub_second_precision() -> None:
    """ROLLOUT_IN_PROGRESS: a stamp read back 515ms later says 515ms, not 0s."""
    stamped = Scenario().decide()
    assert stamped.stamp is not None
    later = NOW + timedelta(milliseconds=515)
    raw = stamped.stamp.value
    parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    held = replace(
        Scenario(now=later).with_deployment(restarted_at=parsed, restarted_at_raw=raw)
    ).decide()

    assert held.waited == timedelta(milliseconds=515)
    assert "rollout requested 515ms ago" in held.message


def test_after_a_conflict_the_second_decision_sees_the_other_stamp() -> None:
    """What the caller does on 409: re-read, decide again; another replica's stamp ->
    ROLLOUT_IN_PROGRESS."""
    first = Scenario().decide()
    conflict = after_write_failure(first, WriteFailure.CONFLICT, status=409, attempt=1)
    assert conflict is FollowUp.REREAD_AND_DECIDE

    reread = Scenario().restarted(timedelta(seconds=1))
    second = reread.decide()

    assert second.reason is Reason.ROLLOUT_IN_PROGRESS
    assert second.stamp is None


# --- resolve_owner ----------------------------------------------------------------------------

REPLICASET = ReplicaSetInfo(namespace="default", name="web-5d9", uid="rs", owner_deployment="web")


def test_resolve_owner_walks_pod_replicaset_deployment() -> None:
    replicasets = {("default", "web-5d9"): REPLICASET}
    deployments = {("default", "web"): DEPLOYMENT}

    lookup = resolve_owner(
        POD,
        lambda ns, name: replicasets.get((ns, name)),
        lambda ns, name: deployments.get((ns, name)),
    )

    assert lookup == DeploymentFound(DEPLOYMENT)


@pytest.mark.parametrize(
    ("pod", "replicaset", "deployment", "expected"),
    [
        (
            replace(POD, owner_kind=None, owner_replicaset=None),
            REPLICASET,
            DEPLOYMENT,
            NoDeployment("bare pod"),
        ),
        (
            replace(POD, owner_kind="StatefulSet", owner_replicaset=None),
            REPLICASET,
            DEPLOYMENT,
            NoDeployment("controlled by a StatefulSet"),
        ),
        (
            POD,
            None,
            DEPLOYMENT,
            OwnerUnresolved("ReplicaSet default/web-5d9 not found"),
        ),
        (
            POD,
            replace(REPLICASET, owner_deployment=None),
            DEPLOYMENT,
            NoDeployment("ReplicaSet default/web-5d9 has no owning Deployment"),
        ),
        (POD, REPLICASET, None, OwnerUnresolved("Deployment default/web not found")),
    ],
)
def test_resolve_owner_dead_ends(
    pod: PodInfo,
    replicaset: ReplicaSetInfo | None,
    deployment: DeploymentInfo | None,
    expected: OwnerLookup,
) -> None:
    assert resolve_owner(pod, lambda ns, n: replicaset, lambda ns, n: deployment) == expected


def test_decision_is_immutable() -> None:
    with pytest.raises(AttributeError, match="immutable type"):
        REQUESTED.allowed = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("template_value", "expected"),
    [
        (None, "2024-05-01T12:00:00.400000Z"),
        ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00.400000Z"),  # an old whole-second stamp
        # A previous drain stamped in this very microsecond: the reconciler would read the
        # copy as already done, so the new stamp moves one microsecond on.
        ("2024-05-01T12:00:00.400000Z", "2024-05-01T12:00:00.400001Z"),
    ],
)
def test_a_stamp_never_repeats_the_templates_restarted_at(
    template_value: str | None, expected: str
) -> None:
    deployment = replace(DEPLOYMENT, template_restarted_at=template_value)
    now = datetime(2024, 5, 1, 12, 0, 0, 400_000, tzinfo=UTC)
    decision = decide(REQUEST, FOUND, DeploymentFound(deployment), DEFAULT_CONFIG, now)
    assert decision.stamp is not None
    assert decision.stamp.value == expected
    assert decision.stamp.patch[-1]["value"] in (expected, {RESTARTED_AT_ANNOTATION: expected})
