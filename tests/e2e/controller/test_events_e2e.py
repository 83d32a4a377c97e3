"""The event writer against kubesim: what `kubectl describe` shows, aggregation, best effort."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Event

from graceful_drain.controller.decision.model import ObjectRef
from graceful_drain.controller.writes.events import (
    DRAIN_STARTED,
    DRAIN_WAITING,
    DrainEvents,
    EvictionHeld,
    RolloutRequested,
)
from graceful_drain.kube.events import NORMAL, EventRecorder, InvolvedObject
from kubesim.apiserver.faults import FaultRule
from kubesim.sim import KubeSim

from .deployments import NAME, NS, deployment_manifest, events_about, kubectl

pytestmark = pytest.mark.e2e

WEB = ObjectRef(NS, NAME)
POD = ObjectRef(NS, "web-5d9-abcde")


@pytest.fixture
async def recorder(lk: AsyncClient) -> AsyncIterator[EventRecorder]:
    writer = EventRecorder(lk, instance="graceful-drain-0")
    await writer.start()
    yield writer
    await writer.stop()


async def test_started_and_held_events_show_in_kubectl_describe(
    sim: KubeSim, lk: AsyncClient, recorder: EventRecorder
) -> None:
    sim.create(deployment_manifest())
    # uid_of knows nothing (a cold cache): the recorder looks the uid up itself.
    events = DrainEvents(recorder, held_interval=0.0)
    assert events.emit(RolloutRequested(WEB, POD, "node-a", "2024-05-01T12:00:00Z"))
    for waited in (5, 10, 15):
        assert events.emit(EvictionHeld(WEB, POD, "node-a", timedelta(seconds=waited)))
    await recorder.flush()

    describe = await kubectl(sim.kubeconfig_path, "describe", "deployment", NAME)
    listed = {event["reason"]: event for event in await events_about(lk)}

    assert recorder.stats.created == 2 and recorder.stats.aggregated == 2
    assert listed[DRAIN_STARTED]["count"] == 1
    assert "pod web-5d9-abcde can leave node node-a" in listed[DRAIN_STARTED]["message"]
    held = listed[DRAIN_WAITING]
    assert held["count"] == 3
    assert held["message"].endswith("(waited 15s)")  # the latest occurrence's message
    started_line = next(line for line in describe.splitlines() if DRAIN_STARTED in line)
    held_line = next(line for line in describe.splitlines() if DRAIN_WAITING in line)
    assert "graceful-drain.stonal.com/controller" in started_line
    assert "(x3 over" in held_line


async def test_held_events_are_rate_limited_per_deployment(
    sim: KubeSim, lk: AsyncClient, recorder: EventRecorder
) -> None:
    sim.create(deployment_manifest())
    sim.create(deployment_manifest("api"))
    events = DrainEvents(recorder)  # 30 s per Deployment

    assert events.emit(EvictionHeld(WEB, POD, "node-a", None))
    assert not events.emit(EvictionHeld(WEB, POD, "node-a", None))
    assert events.emit(EvictionHeld(ObjectRef(NS, "api"), POD, "node-a", None))
    await recorder.flush()

    assert [e["count"] for e in await events_about(lk)] == [1]
    assert [e["count"] for e in await events_about(lk, "api")] == [1]


async def test_a_deleted_event_starts_a_new_series(
    sim: KubeSim, lk: AsyncClient, recorder: EventRecorder
) -> None:
    sim.create(deployment_manifest())
    web = InvolvedObject.deployment(WEB.namespace, WEB.name)
    recorder.record(web, NORMAL, DRAIN_WAITING, "first")
    await recorder.flush()
    (first,) = await events_about(lk)
    await lk.delete(Event, first["metadata"]["name"], namespace=NS)

    recorder.record(web, NORMAL, DRAIN_WAITING, "second")
    await recorder.flush()

    (second,) = await events_about(lk)
    assert second["message"] == "second" and second["count"] == 1
    assert recorder.stats.failed == 0


async def test_refused_writes_are_counted_never_raised(
    sim: KubeSim, lk: AsyncClient, recorder: EventRecorder
) -> None:
    sim.create(deployment_manifest())
    sim.faults.add(FaultRule(verb="create", resource="events", error_code=500))
    web = InvolvedObject.deployment(WEB.namespace, WEB.name, "some-uid")

    recorder.record(web, NORMAL, DRAIN_WAITING, "lost")
    await recorder.flush()

    assert recorder.stats.failed == 1
    assert await events_about(lk) == []


async def test_a_full_queue_drops_instead_of_blocking(lk: AsyncClient) -> None:
    writer = EventRecorder(lk, instance="x", queue_limit=2)  # not started: nothing drains it
    web = InvolvedObject.deployment(WEB.namespace, WEB.name, "uid")
    for index in range(5):
        writer.record(web, NORMAL, DRAIN_WAITING, f"held {index}")

    assert writer.stats.dropped == 3
