"""The reconciler's pure decision (`next_step`) and its guarded JSON patches."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.annotations import COMPLETED_AT_ANNOTATION, RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.model import (
    TEMPLATE_RESTARTED_AT_ANNOTATION,
    DeploymentInfo,
)
from graceful_drain.controller.reconcile.rollout import (
    Abandoned,
    Completed,
    CopyToTemplate,
    DiscardMalformed,
    Expired,
    Idle,
    JsonPatch,
    Retain,
    Retire,
    Step,
    TimedOut,
    WaitForRollout,
    completion_patch,
    copy_patch,
    next_step,
    removal_patch,
)
from graceful_drain.kube.timefmt import format_rfc3339
from kubesim.apiserver.patching.apply import Json, PatchInvalid, apply_json_patch

from . import objects
from .objects import NOW

TIMEOUT = timedelta(minutes=10)
STAMP = "2024-05-01T11:58:00Z"  # two minutes before NOW
STAMPED_AT = datetime(2024, 5, 1, 11, 58, 0, tzinfo=UTC)
DEADLINE = STAMPED_AT + TIMEOUT
OLDER = "2024-04-30T08:00:00Z"

Obj = dict[str, Any]


def raw_deployment(**changes: Any) -> Obj:
    """objects.raw_deployment, stamped at STAMP unless said otherwise."""
    return objects.raw_deployment(**{"restarted_at": STAMP, **changes})


def apply(raw: Obj, patch: JsonPatch) -> Obj:
    """The patch applied by kubesim's JSON patch (evanphx/json-patch semantics)."""
    return cast(Obj, apply_json_patch(cast(Json, raw), cast(Json, patch)))


def info(**changes: Any) -> DeploymentInfo:
    return DeploymentInfo.from_object(raw_deployment(**changes))


@dataclass(frozen=True)
class Case:
    name: str
    deployment: DeploymentInfo
    expected: Step
    now: datetime = NOW


WAITED = NOW - STAMPED_AT
ROLLING = {"template": STAMP, "generation": 3, "observed": 3, "status_replicas": 2, "ready": 1}

CASES = [
    Case("no annotation", info(restarted_at=None), Idle("no restarted-at annotation")),
    Case(
        "no annotation, even with a copied template",
        info(restarted_at=None, template=STAMP),
        Idle("no restarted-at annotation"),
    ),
    Case(
        "being deleted",
        info(deleting=True),
        Idle("the Deployment is being deleted"),
    ),
    Case("malformed annotation", info(restarted_at="yesterday"), DiscardMalformed("yesterday")),
    Case("fresh stamp: copy it", info(), CopyToTemplate(STAMP, DEADLINE)),
    Case(
        "template holds an older restart: copy the new value",
        info(template=OLDER),
        CopyToTemplate(STAMP, DEADLINE),
    ),
    Case(
        "template without annotations map: copy",
        info(template_annotations=False),
        CopyToTemplate(STAMP, DEADLINE),
    ),
    Case(
        "complete-looking status before the copy is not completion",
        info(template=None),
        CopyToTemplate(STAMP, DEADLINE),
    ),
    Case(
        "copied, controller has not observed the new generation",
        info(template=STAMP, generation=3, observed=2),
        WaitForRollout(STAMP, DEADLINE),
    ),
    Case("copied, surge pod not ready yet", info(**ROLLING), WaitForRollout(STAMP, DEADLINE)),
    Case(
        "copied, old pod still there (status.replicas 2)",
        info(template=STAMP, status_replicas=2, ready=2, available=2, updated=1),
        WaitForRollout(STAMP, DEADLINE),
    ),
    Case(
        "copied, ready but not yet available (minReadySeconds)",
        info(template=STAMP, available=0),
        WaitForRollout(STAMP, DEADLINE),
    ),
    Case(
        "copied, new pods not all updated",
        info(template=STAMP, updated=0),
        WaitForRollout(STAMP, DEADLINE),
    ),
    Case("copied and complete", info(template=STAMP), Completed(STAMP, WAITED)),
    Case(
        "scaled to zero and copied: complete",
        info(template=STAMP, replicas=0, status_replicas=0, updated=0, ready=0, available=0),
        Completed(STAMP, WAITED),
    ),
    Case(
        "complete after the deadline still counts as completed",
        info(template=STAMP),
        Completed(STAMP, timedelta(minutes=30)),
        now=STAMPED_AT + timedelta(minutes=30),
    ),
    Case(
        # Reported, but restarted-at stays so the webhook keeps allowing
        # (Reason.ROLLOUT_TIMEOUT).
        "deadline reached while rolling",
        info(**ROLLING),
        Expired(STAMP, TIMEOUT),
        now=DEADLINE,
    ),
    Case(
        "deadline reached before the copy",
        info(),
        TimedOut(STAMP, TIMEOUT + timedelta(seconds=1)),
        now=DEADLINE + timedelta(seconds=1),
    ),
    Case(
        "one second before the deadline: still waiting",
        info(**ROLLING),
        WaitForRollout(STAMP, DEADLINE),
        now=DEADLINE - timedelta(seconds=1),
    ),
    # v2: never copy into a paused Deployment's template, keep a rollout of ours going.
    Case("paused before the copy: abandon", info(paused=True), Abandoned(STAMP)),
    Case(
        "paused after the copy: keep waiting for it",
        info(**ROLLING, paused=True),
        WaitForRollout(STAMP, DEADLINE),
    ),
    # v2: the stamp outlives completion by the template's grace period (detector evidence).
    Case(
        "completed-at written: retain for the grace period",
        info(template=STAMP, completed_at="2024-05-01T11:59:50.500000Z", grace=45),
        Retain(STAMP, datetime(2024, 5, 1, 12, 0, 35, 500_000, tzinfo=UTC)),
    ),
    Case(
        "completed-at written, default 30s grace period over: retire",
        info(template=STAMP, completed_at="2024-05-01T11:59:30Z"),
        Retire(STAMP),
    ),
    Case(
        "an earlier drain's completed-at next to a new stamp: copy the new one",
        info(template=OLDER, completed_at="2024-05-01T11:00:00Z"),
        CopyToTemplate(STAMP, DEADLINE),
    ),
    Case(
        "completed-at malformed: retire",
        info(template=STAMP, completed_at="soon"),
        Retire(STAMP),
    ),
    Case(
        "stamp slightly in the future (clock skew): copy, wait from the stamp",
        info(),
        CopyToTemplate(STAMP, DEADLINE),
        now=STAMPED_AT - timedelta(seconds=5),
    ),
    Case(
        "stamp further in the future than the timeout: give up",
        info(),
        TimedOut(STAMP, timedelta(0), from_the_future=True),
        now=STAMPED_AT - TIMEOUT - timedelta(seconds=1),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_next_step(case: Case) -> None:
    assert next_step(case.deployment, case.now, TIMEOUT) == case.expected


# --- properties -------------------------------------------------------------------------------

counts = st.integers(min_value=0, max_value=3)
moments = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2024, 12, 31), timezones=st.just(UTC)
)


@st.composite
def deployments(draw: st.DrawFn) -> DeploymentInfo:
    stamp = draw(st.one_of(st.none(), moments.map(format_rfc3339), st.just("not-a-time")))
    template = draw(st.one_of(st.none(), st.just(stamp), moments.map(format_rfc3339)))
    generation = draw(st.integers(min_value=1, max_value=4))
    return info(
        restarted_at=stamp,
        template=template,
        generation=generation,
        observed=draw(st.integers(min_value=0, max_value=generation + 1)),
        replicas=draw(counts),
        status_replicas=draw(counts),
        updated=draw(counts),
        ready=draw(counts),
        available=draw(counts),
        deleting=draw(st.booleans()),
        template_annotations=draw(st.booleans()),
    )


timeouts = st.integers(min_value=1, max_value=3600).map(lambda s: timedelta(seconds=s))


@given(deployments(), moments, timeouts)
def test_only_a_complete_copied_rollout_is_completed(
    deployment: DeploymentInfo, now: datetime, timeout: timedelta
) -> None:
    step = next_step(deployment, now, timeout)
    if isinstance(step, Completed):
        assert deployment.template_restarted_at == deployment.restarted_at_raw
        assert deployment.rollout_complete
        assert step.duration >= timedelta(0)


@given(deployments(), moments, timeouts)
def test_nothing_waits_past_its_deadline(
    deployment: DeploymentInfo, now: datetime, timeout: timedelta
) -> None:
    step = next_step(deployment, now, timeout)
    if isinstance(step, CopyToTemplate | WaitForRollout):
        assert deployment.restarted_at is not None
        assert step.deadline == deployment.restarted_at + timeout
        assert now < step.deadline
        assert step.deadline - now <= 2 * timeout  # a far-future stamp is given up on instead


@given(deployments(), moments, timeouts)
def test_every_step_about_the_annotation_carries_its_exact_value(
    deployment: DeploymentInfo, now: datetime, timeout: timedelta
) -> None:
    step = next_step(deployment, now, timeout)
    if isinstance(step, Idle):
        assert deployment.restarted_at_raw is None or deployment.deleting
    else:
        assert step.value == deployment.restarted_at_raw


@given(deployments(), moments, timeouts)
def test_after_the_copy_the_next_step_never_copies_again(
    deployment: DeploymentInfo, now: datetime, timeout: timedelta
) -> None:
    step = next_step(deployment, now, timeout)
    if not isinstance(step, CopyToTemplate):
        return
    raw = _raw_of(deployment)
    patched = DeploymentInfo.from_object(apply(raw, copy_patch(deployment, step.value)))
    assert patched.template_restarted_at == step.value
    assert not isinstance(next_step(patched, now, timeout), CopyToTemplate)


@given(deployments(), moments, timeouts)
def test_a_paused_deployment_never_gets_the_copy(
    deployment: DeploymentInfo, now: datetime, timeout: timedelta
) -> None:
    paused = DeploymentInfo.from_object(
        raw_deployment(
            restarted_at=deployment.restarted_at_raw,
            template=deployment.template_restarted_at,
            paused=True,
        )
    )
    assert not isinstance(next_step(paused, now, timeout), CopyToTemplate)


def test_completion_patch_writes_completed_at_once() -> None:
    raw = raw_deployment(template=STAMP)
    deployment = DeploymentInfo.from_object(raw)

    patched = apply(raw, completion_patch(deployment, STAMP, "2024-05-01T12:00:00.000000Z"))

    assert patched["metadata"]["annotations"] == {
        RESTARTED_AT_ANNOTATION: STAMP,
        COMPLETED_AT_ANNOTATION: "2024-05-01T12:00:00.000000Z",
    }
    newer = {**patched, "metadata": {**patched["metadata"], "resourceVersion": "43"}}
    with pytest.raises(PatchInvalid):  # another reconciler's write came first
        apply(newer, completion_patch(deployment, STAMP, "2024-05-01T12:00:00.100000Z"))


def test_the_copy_drops_an_earlier_drains_completed_at() -> None:
    raw = raw_deployment(template=OLDER, completed_at="2024-05-01T11:00:00Z")
    deployment = DeploymentInfo.from_object(raw)

    patched = DeploymentInfo.from_object(apply(raw, copy_patch(deployment, STAMP)))

    assert patched.template_restarted_at == STAMP
    assert patched.completed_at_raw is None
    assert not isinstance(next_step(patched, NOW, TIMEOUT), Retain | Retire)


def test_retiring_removes_both_annotations() -> None:
    raw = raw_deployment(template=STAMP, completed_at="2024-05-01T11:59:30Z")

    patched = apply(raw, removal_patch(STAMP, completed=True))

    assert patched["metadata"]["annotations"] == {}


def _raw_of(deployment: DeploymentInfo) -> Obj:
    """Back from the slim view to a raw object with the same annotation shapes."""
    return raw_deployment(
        restarted_at=deployment.restarted_at_raw,
        template=deployment.template_restarted_at,
        template_annotations=deployment.template_has_annotations,
    )


# --- the patches, applied as the API server applies them -------------------------------------


def test_copy_patch_sets_the_same_value_and_keeps_other_template_annotations() -> None:
    raw = raw_deployment(template=OLDER)
    patched = apply(raw, copy_patch(info(template=OLDER), STAMP))

    annotations = patched["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"team": "platform", TEMPLATE_RESTARTED_AT_ANNOTATION: STAMP}
    assert patched["metadata"]["annotations"] == {RESTARTED_AT_ANNOTATION: STAMP}


def test_copy_patch_is_idempotent() -> None:
    raw = raw_deployment()
    once = apply(raw, copy_patch(info(), STAMP))
    twice = apply(copy.deepcopy(once), copy_patch(info(), STAMP))

    assert twice == once


def test_copy_patch_adds_a_missing_annotations_map_whole() -> None:
    raw = raw_deployment(template_annotations=False)
    patched = apply(raw, copy_patch(info(template_annotations=False), STAMP))

    assert patched["spec"]["template"]["metadata"]["annotations"] == {
        TEMPLATE_RESTARTED_AT_ANNOTATION: STAMP
    }


def test_copy_patch_without_a_map_refuses_a_newer_object() -> None:
    """The whole-map add would wipe annotations added since the read: the resourceVersion
    `test` refuses it."""
    stale = info(template_annotations=False)
    current = raw_deployment(template_annotations=True)
    current["metadata"]["resourceVersion"] = "43"

    with pytest.raises(PatchInvalid):
        apply(current, copy_patch(stale, STAMP))


@pytest.mark.parametrize(
    ("annotations", "why"),
    [({}, "restarted-at removed since"), ({RESTARTED_AT_ANNOTATION: OLDER}, "a newer drain")],
)
def test_copy_patch_refuses_when_restarted_at_changed(annotations: Obj, why: str) -> None:
    raw = raw_deployment()
    raw["metadata"]["annotations"] = annotations

    with pytest.raises(PatchInvalid):
        apply(raw, copy_patch(info(), STAMP))


def test_removal_patch_removes_only_restarted_at() -> None:
    raw = raw_deployment(template=STAMP)
    raw["metadata"]["annotations"]["team"] = "platform"

    patched = apply(raw, removal_patch(STAMP))

    assert patched["metadata"]["annotations"] == {"team": "platform"}
    assert patched["spec"] == raw["spec"]


@pytest.mark.parametrize("current", [None, OLDER], ids=["already removed", "replaced"])
def test_removal_patch_is_guarded_by_the_value(current: str | None) -> None:
    raw = raw_deployment(restarted_at=current)

    with pytest.raises(PatchInvalid):
        apply(raw, removal_patch(STAMP))


def test_annotation_keys_are_escaped_as_json_pointers() -> None:
    paths = [op["path"] for op in copy_patch(info(), STAMP) + removal_patch(STAMP)]

    assert "/metadata/annotations/graceful-drain.stonal.com~1restarted-at" in paths
    assert "/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt" in paths
