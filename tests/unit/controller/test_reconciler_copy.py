"""One template write per stamp: a reconciler whose copy went through does not copy again from
a view older than its write (docs/decisions.md, "The reconciler")."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from graceful_drain.controller.decision.model import DeploymentInfo
from graceful_drain.controller.reconcile.reconciler import Reconciler
from graceful_drain.controller.reconcile.rollout import CopyToTemplate, WaitForRollout

from .objects import NOW, raw_deployment
from .reconciler_fakes import Patcher, Source

STAMP = "2024-05-01T11:59:58.000000Z"


def stamped(**changes: Any) -> DeploymentInfo:
    raw = raw_deployment(restarted_at=STAMP, generation=3, observed=3)
    return replace(DeploymentInfo.from_object(raw), **changes)


async def test_a_stale_view_after_our_copy_does_not_copy_again() -> None:
    source, patcher = Source(stamped()), Patcher()
    reconciler = Reconciler(source, patcher, rollout_timeout=timedelta(minutes=10),
                            clock=lambda: NOW)  # fmt: skip

    first = await reconciler.reconcile(("default", "web"))
    assert isinstance(first.step, CopyToTemplate) and first.applied
    # The Deployment controller wrote status meanwhile: a newer resourceVersion, same
    # generation, and the cache has not shown our template write yet.
    source.current = stamped(resource_version="8")
    second = await reconciler.reconcile(("default", "web"))
    assert isinstance(second.step, WaitForRollout)
    assert len(patcher.patches) == 1

    # Someone replaced the template since (a later generation without the stamp): copy again.
    source.current = stamped(resource_version="9", generation=5)
    third = await reconciler.reconcile(("default", "web"))
    assert isinstance(third.step, CopyToTemplate) and third.applied
    assert len(patcher.patches) == 2


async def test_a_new_stamp_is_copied_whatever_the_last_copy() -> None:
    source, patcher = Source(stamped()), Patcher()
    reconciler = Reconciler(source, patcher, rollout_timeout=timedelta(minutes=10),
                            clock=lambda: NOW)  # fmt: skip
    await reconciler.reconcile(("default", "web"))
    newer = "2024-05-01T11:59:59.000000Z"
    source.current = stamped(restarted_at=datetime(2024, 5, 1, 11, 59, 59, tzinfo=UTC),
                             restarted_at_raw=newer)  # fmt: skip
    again = await reconciler.reconcile(("default", "web"))
    assert isinstance(again.step, CopyToTemplate) and again.step.value == newer
    assert len(patcher.patches) == 2


async def test_the_rollout_deadline_is_the_loops_requeue_after() -> None:
    """The copy and every wait after it come back at restarted-at + rolloutTimeout (a timer in
    kube/loop.py, no polling); a Deployment gone from the cache needs nothing more."""
    source, patcher = Source(stamped()), Patcher()
    reconciler = Reconciler(source, patcher, rollout_timeout=timedelta(minutes=10),
                            clock=lambda: NOW)  # fmt: skip
    deadline = (timedelta(minutes=10) - timedelta(seconds=2)).total_seconds()  # STAMP is NOW-2s

    copied = await reconciler.reconcile(("default", "web"))
    waiting = await reconciler.reconcile(("default", "web"))
    assert isinstance(copied.step, CopyToTemplate) and isinstance(waiting.step, WaitForRollout)
    assert copied.requeue_after == waiting.requeue_after == deadline

    source.get = lambda namespace, name: None  # type: ignore[method-assign]
    gone = await reconciler.reconcile(("default", "web"))
    assert gone.step is None and gone.requeue_after is None
