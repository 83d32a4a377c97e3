"""A held pod deleted instead of evicted (controller/reconcile/bypass.py): which pod changes are a
bypass, and what is reported. The behaviour under the real Karpenter's
terminationGracePeriod is proven in tests/e2e/real_control_plane/test_karpenter_real.py."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.controller.decision.model import DeploymentInfo, PodInfo, ReplicaSetInfo
from graceful_drain.controller.reconcile.bypass import BypassWatcher, was_bypassed
from graceful_drain.controller.writes.events import (
    DRAIN_BYPASSED,
    DRAIN_COMPLETED,
    DrainEvents,
    completed_message,
)
from graceful_drain.kube.events import InvolvedObject
from graceful_drain.kube.informer import Change

from .objects import POD, deployment

STAMP = "2024-05-01T12:00:00Z"
# Stamped, the restart copied into the template, a second pod made: a drain of POD.
DEPLOYMENT = deployment(status_replicas=2, restarted_at_raw=STAMP, template_restarted_at=STAMP)
TERMINATING = replace(POD, terminating=True)
NOT_READY = replace(POD, ready=False)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (POD, TERMINATING, True),  # deleted with a grace period
        (POD, None, True),  # deleted with grace period 0: gone at once
        (POD, POD, False),  # an update that deletes nothing
        (None, POD, False),  # created
        (TERMINATING, None, False),  # the end of a deletion already seen
        (NOT_READY, replace(NOT_READY, terminating=True), False),  # no Ready pod was lost
    ],
)
def test_was_bypassed(old: PodInfo | None, new: PodInfo | None, expected: bool) -> None:
    assert was_bypassed(old, new) is expected


pods = st.builds(
    replace, st.just(POD), ready=st.booleans(), terminating=st.booleans()
)  # fmt: skip


@given(old=st.none() | pods, new=st.none() | pods)
def test_a_bypass_is_always_a_ready_pod_starting_to_go(
    old: PodInfo | None, new: PodInfo | None
) -> None:
    if was_bypassed(old, new):
        assert old is not None and old.ready and not old.terminating
        assert new is None or new.terminating


@dataclass
class View:
    found: DeploymentInfo
    ready_others: int = 0

    def replicaset(self, namespace: str, name: str) -> ReplicaSetInfo | None:
        return ReplicaSetInfo(namespace=namespace, name=name, uid="rs-uid", owner_deployment="web")

    def deployment(self, namespace: str, name: str) -> DeploymentInfo | None:
        return self.found

    def ready_besides(self, pod: PodInfo, deployment: DeploymentInfo) -> int:
        return self.ready_others


@dataclass
class Recorded:
    events: list[tuple[InvolvedObject, str, str, str]] = field(default_factory=list)

    def record(self, regarding: InvolvedObject, type_: str, reason: str, message: str) -> None:
        self.events.append((regarding, type_, reason, message))


@dataclass
class Count:
    bypassed: int = 0

    def record_bypassed(self) -> None:
        self.bypassed += 1


def watch(view: View, active: bool = True) -> tuple[BypassWatcher, DrainEvents, Recorded, Count]:
    recorded, count = Recorded(), Count()
    events = DrainEvents(recorded)
    return BypassWatcher(view, events, count, active=lambda: active), events, recorded, count


def deleted(old: PodInfo, new: PodInfo | None) -> Change[PodInfo]:
    return Change("DELETED" if new is None else "MODIFIED", (old.namespace, old.name), old, new)


@pytest.mark.parametrize(
    ("deployment", "ready_others", "active", "reported"),
    [
        (DEPLOYMENT, 0, True, True),
        (DEPLOYMENT, 1, True, False),  # the ReplicaSet controller's scale-down: a new pod is Ready
        (DEPLOYMENT, 0, False, False),  # not the replica that reconciles
        (replace(DEPLOYMENT, restarted_at_raw=None), 0, True, False),  # no drain of ours
        (replace(DEPLOYMENT, completed_at_raw=STAMP), 0, True, False),  # ours completed
    ],
)
def test_a_held_pod_deleted_without_its_eviction_is_reported(
    deployment: DeploymentInfo, ready_others: int, active: bool, reported: bool
) -> None:
    watcher, _, recorded, count = watch(View(deployment, ready_others), active)
    watcher.on_pod_change(deleted(POD, TERMINATING))
    assert count.bypassed == int(reported)
    assert [e[1:3] for e in recorded.events] == ([("Warning", DRAIN_BYPASSED)] if reported else [])
    if reported:
        regarding, _, _, message = recorded.events[0]
        assert (regarding.kind, regarding.name) == ("Deployment", "web")
        assert "web-5d9-abcde" in message and "node-a" in message and STAMP in message
        assert "without its eviction" in message


def test_the_completion_after_a_bypass_does_not_say_evictions_proceed() -> None:
    watcher, events, recorded, _ = watch(View(DEPLOYMENT))
    watcher.on_pod_change(deleted(POD, None))
    events.completed(DEPLOYMENT, restarted_at=STAMP, duration=timedelta(seconds=37))
    [_, (_, type_, reason, message)] = recorded.events
    assert (type_, reason) == ("Normal", DRAIN_COMPLETED)
    assert message == completed_message(STAMP, timedelta(seconds=37), "web-5d9-abcde")
    assert "evictions proceed" not in message and DRAIN_BYPASSED in message
    # The next drain's completion is an ordinary one again.
    events.completed(DEPLOYMENT, restarted_at=STAMP, duration=timedelta(seconds=5))
    assert recorded.events[-1][3].endswith("evictions proceed")
