"""A write the API server refuses for good is the loop's TerminalError (docs/decisions.md, "The
reconciler"): a 400 or a 422 saying the patched Deployment is invalid; a copy keeps its rollout
deadline, where the step becomes the stamp's removal. A `test` that no longer applies, a
Deployment gone, RBAC and the API server's transient answers are not: the first two are done,
the others retried."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from graceful_drain.controller.decision.ledger import LedgerEntry
from graceful_drain.controller.decision.model import DeploymentInfo
from graceful_drain.controller.reconcile.reconciler import Reconciler
from graceful_drain.controller.reconcile.rollout import CopyToTemplate, TimedOut, next_step
from graceful_drain.kube.loop import TerminalError
from graceful_drain.kube.meta import JSON_PATCH_NOT_APPLICABLE

from .objects import NOW, raw_deployment
from .reconciler_fakes import Patcher, Source

KEY = ("default", "web")
TIMEOUT = timedelta(minutes=10)
STAMP = "2024-05-01T11:59:58.000000Z"  # NOW - 2 s: the copy's deadline is 598 s away
LONG_AGO = "2024-05-01T11:00:00.000000Z"  # over the timeout, never copied: TimedOut
INVALID = 'Deployment.apps "web" is invalid: spec.template.metadata.annotations: Invalid value'


def refused(code: int, message: str = "refused") -> ApiError:
    return ApiError(status=Status(code=code, message=message, reason="Refused"))


def reconcile(deployment: DeploymentInfo, failure: ApiError) -> tuple[Reconciler, Patcher]:
    patcher = Patcher(failure=failure)
    reconciler = Reconciler(Source(deployment), patcher, rollout_timeout=TIMEOUT,
                            clock=lambda: NOW)  # fmt: skip
    return reconciler, patcher


def stamped(value: str = STAMP) -> DeploymentInfo:
    return DeploymentInfo.from_object(raw_deployment(restarted_at=value))


@pytest.mark.parametrize(
    "failure", [refused(400, "the patch is malformed"), refused(422, INVALID)], ids=["400", "422"]
)
async def test_a_copy_refused_for_good_is_terminal_until_its_deadline(failure: ApiError) -> None:
    reconciler, patcher = reconcile(stamped(), failure)
    with pytest.raises(TerminalError) as raised:
        await reconciler.reconcile(KEY)
    assert len(patcher.patches) == 1
    assert raised.value.__cause__ is failure
    assert raised.value.requeue_after == pytest.approx((TIMEOUT - timedelta(seconds=2)).seconds)
    assert "template copy of default/web was refused for good" in str(raised.value)
    assert str(failure.status.message) in str(raised.value)


async def test_a_removal_refused_for_good_waits_for_a_change() -> None:
    reconciler, _ = reconcile(stamped(LONG_AGO), refused(400))
    with pytest.raises(TerminalError) as raised:
        await reconciler.reconcile(KEY)
    assert raised.value.requeue_after is None
    assert "restarted-at removal" in str(raised.value)


async def test_a_ledger_clean_refused_for_good_keeps_the_rollout_timer() -> None:
    """Not stamped: no rollout timer to keep; the expired entry's removal is refused."""
    expired = LedgerEntry("web-1", "uid-web-1", NOW - timedelta(minutes=3))
    deployment = replace(DeploymentInfo.from_object(raw_deployment()), evictions=(expired,))
    reconciler, _ = reconcile(deployment, refused(422, INVALID))
    with pytest.raises(TerminalError) as raised:
        await reconciler.reconcile(KEY)
    assert raised.value.requeue_after is None
    assert "evictions ledger clean" in str(raised.value)


async def test_a_patch_that_no_longer_applies_or_a_deployment_gone_is_done() -> None:
    for failure in (refused(422, JSON_PATCH_NOT_APPLICABLE), refused(404)):
        reconciler, _ = reconcile(stamped(), failure)
        result = await reconciler.reconcile(KEY)
        assert isinstance(result.step, CopyToTemplate)
        assert result.already_done and not result.applied


@pytest.mark.parametrize("code", [401, 403, 409, 429, 500, 503])
async def test_credentials_rbac_conflicts_and_transient_answers_are_retried(code: int) -> None:
    """A plain ApiError: the loop retries it after the Deployment's back-off (RBAC and
    credentials are fixed from outside the object; the rest pass)."""
    for deployment in (stamped(), stamped(LONG_AGO)):
        reconciler, _ = reconcile(deployment, refused(code))
        with pytest.raises(ApiError):
            await reconciler.reconcile(KEY)


def test_the_removal_case_is_a_removal() -> None:
    """The premise of the removal test: a stamp over the timeout, never copied, is removed."""
    assert isinstance(next_step(stamped(LONG_AGO), NOW, TIMEOUT), TimedOut)
