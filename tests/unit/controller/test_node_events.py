"""`GracefulDrainHolding` on the Node while an eviction of a pod on it is held
(controller/writes/events.py): what it says, when it is written, and where its Event lives.
Read under the real Karpenter in tests/e2e/real_control_plane/test_karpenter_real.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from graceful_drain.controller.decision.model import ObjectRef
from graceful_drain.controller.writes.events import (
    DRAIN_HOLDING,
    DRAIN_STARTED,
    DRAIN_WAITING,
    DrainEvents,
    EvictionHeld,
    RolloutRequested,
    holding_message,
)
from graceful_drain.kube.events import EventRecord, InvolvedObject, event_body

DEPLOYMENT = ObjectRef("shop", "web")
POD = ObjectRef("shop", "web-5d9-abcde")


@dataclass
class Recorded:
    events: list[tuple[InvolvedObject, str, str, str]] = field(default_factory=list)

    def record(self, regarding: InvolvedObject, type_: str, reason: str, message: str) -> None:
        self.events.append((regarding, type_, reason, message))


def test_the_message_names_graceful_drain_the_pod_the_deployment_and_the_replacement() -> None:
    assert holding_message(DEPLOYMENT, POD, timedelta(seconds=95)) == (
        "graceful-drain holds the eviction of pod shop/web-5d9-abcde until a replacement from "
        "Deployment shop/web is Ready (rollout in progress, replacement not Ready yet, "
        "waited 1m35s)"
    )


@pytest.mark.parametrize(
    ("event", "deployment_reason"),
    [
        (RolloutRequested(DEPLOYMENT, POD, "node-a", "2024-05-01T12:00:00Z"), DRAIN_STARTED),
        (EvictionHeld(DEPLOYMENT, POD, "node-a", timedelta(seconds=3)), DRAIN_WAITING),
    ],
)
@pytest.mark.parametrize("node_events", [True, False])
def test_a_held_eviction_is_also_written_on_the_node_by_a_cluster_wide_install(
    event: RolloutRequested | EvictionHeld, deployment_reason: str, node_events: bool
) -> None:
    recorded = Recorded()
    assert DrainEvents(recorded, node_events=node_events).emit(event)
    on = [(r.kind, r.name, r.uid, reason) for r, _, reason, _ in recorded.events]
    expected = [("Deployment", "web", "", deployment_reason)]
    if node_events:
        expected.append(("Node", "node-a", "node-a", DRAIN_HOLDING))
    assert on == expected


def test_no_node_event_for_an_unscheduled_pod() -> None:
    recorded = Recorded()
    DrainEvents(recorded, node_events=True).emit(EvictionHeld(DEPLOYMENT, POD, "", None))
    assert [reason for _, _, reason, _ in recorded.events] == [DRAIN_WAITING]


def test_a_node_event_lives_in_default_and_regards_the_node_by_name() -> None:
    at = datetime(2024, 5, 1, 12, tzinfo=UTC)
    record = EventRecord(InvolvedObject.node("node-a"), "Normal", DRAIN_HOLDING, "held", at)
    body = event_body(record, "node-a.1", "replica-0")
    assert body["metadata"]["namespace"] == "default"
    assert body["involvedObject"] == {
        "apiVersion": "v1", "kind": "Node", "namespace": "", "name": "node-a", "uid": "node-a",
    }  # fmt: skip
    deployment = InvolvedObject.deployment("shop", "web", "uid-1")
    assert deployment.event_namespace == "shop"
