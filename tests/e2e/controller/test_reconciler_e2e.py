"""The reconciler against kubesim: one rollout per drain, guarded removals, events, timers.

No Deployment controller runs here: the tests write the status subresource themselves, so a
rollout completes exactly when a test says so.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import Deployment
from lightkube.types import PatchType

from graceful_drain.annotations import COMPLETED_AT_ANNOTATION, RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.model import (
    TEMPLATE_RESTARTED_AT_ANNOTATION,
    DeploymentInfo,
)
from graceful_drain.controller.reconcile.reconciler import Reconciler
from graceful_drain.controller.reconcile.rollout import Completed, CopyToTemplate, JsonPatch
from graceful_drain.controller.writes.events import DRAIN_COMPLETED, DRAIN_TIMEOUT, DrainEvents
from graceful_drain.controller.writes.patcher import (
    DeploymentPatcher,
    LightkubeDeploymentPatcher,
)
from graceful_drain.kube.events import REPORTING_CONTROLLER, EventRecorder
from graceful_drain.kube.lease import LeaderElector
from graceful_drain.kube.loop import Outcome
from graceful_drain.kube.meta import utc_now
from graceful_drain.kube.timefmt import format_rfc3339, parse_rfc3339
from kubesim.sim import KubeSim

from .conftest import DEADLINE
from .deployments import (
    NAME,
    NS,
    WatchedDeployments,
    deployment_manifest,
    events_about,
    get_deployment,
    kubectl,
    lightkube_client,
    now_stamp,
    stamp,
    wait_for_event,
    watched,
    write_complete_status,
)

pytestmark = pytest.mark.e2e

KEY = (NS, NAME)
TIMEOUT = timedelta(minutes=10)


@dataclass
class RecordingMetrics:
    completed: list[float] = field(default_factory=list)
    timed_out: list[float] = field(default_factory=list)
    in_progress: list[int] = field(default_factory=list)

    def record_rollout_completed(self, seconds: float) -> None:
        self.completed.append(seconds)

    def record_rollout_timed_out(self, seconds: float) -> None:
        self.timed_out.append(seconds)

    def set_drains_in_progress(self, count: int) -> None:
        self.in_progress.append(count)


@dataclass
class Replica:
    """One controller replica's reconciling half: its own client, cache, events and metrics."""

    client: AsyncClient
    deployments: WatchedDeployments
    recorder: EventRecorder
    reconciler: Reconciler
    metrics: RecordingMetrics


@asynccontextmanager
async def replica(
    sim: KubeSim,
    *,
    patcher: DeploymentPatcher | None = None,
    clock: Callable[[], datetime] | None = None,
    rollout_timeout: timedelta = TIMEOUT,
    instance: str = "replica-1",
    start_reconciler: bool = True,
) -> AsyncIterator[Replica]:
    async with AsyncExitStack() as stack:
        client = lightkube_client(sim)
        stack.push_async_callback(client.close)
        deployments = await stack.enter_async_context(watched(client))
        recorder = EventRecorder(client, instance=instance)
        await recorder.start()
        stack.push_async_callback(recorder.stop)
        metrics = RecordingMetrics()
        reconciler = Reconciler(
            deployments.source,
            patcher or LightkubeDeploymentPatcher(client),
            DrainEvents(recorder),
            rollout_timeout=rollout_timeout,
            metrics=metrics,
            clock=clock or utc_now,
        )
        if start_reconciler:
            await reconciler.start()
        stack.push_async_callback(reconciler.stop)
        yield Replica(client, deployments, recorder, reconciler, metrics)


def carries(deployments: WatchedDeployments, value: str | None) -> bool:
    deployment = deployments.get(*KEY)
    return deployment is not None and deployment.restarted_at_raw == value


def completion_recorded(deployments: WatchedDeployments) -> bool:
    deployment = deployments.get(*KEY)
    return deployment is not None and deployment.completed_at_raw is not None


def copied(deployments: WatchedDeployments, value: str) -> bool:
    deployment = deployments.get(*KEY)
    return deployment is not None and deployment.template_restarted_at == value


class RacingPatcher:
    """Holds its first patch until every replica's first patch is in flight, then lets them
    all go at once, and records how each ended."""

    def __init__(self, inner: LightkubeDeploymentPatcher, barrier: asyncio.Barrier) -> None:
        self._inner = inner
        self._barrier = barrier
        self.outcomes: list[int] = []  # 200, or the HTTP status of the refusal
        self.first_done = asyncio.Event()

    async def patch_json(self, namespace: str, name: str, patch: JsonPatch) -> None:
        if not self.outcomes:
            await self._barrier.wait()
        try:
            await self._inner.patch_json(namespace, name, patch)
        except ApiError as error:
            self.outcomes.append(error.status.code or 0)
            raise
        else:
            self.outcomes.append(200)
        finally:
            self.first_done.set()


async def test_two_reconcilers_racing_trigger_exactly_one_rollout(
    sim: KubeSim, lk: AsyncClient
) -> None:
    sim.create(deployment_manifest())
    before = (await get_deployment(lk))["metadata"]["generation"]
    barrier = asyncio.Barrier(2)
    patchers: list[RacingPatcher] = []
    async with AsyncExitStack() as stack:
        replicas = []
        for index in range(2):
            client = lightkube_client(sim)
            stack.push_async_callback(client.close)
            patchers.append(RacingPatcher(LightkubeDeploymentPatcher(client), barrier))
            replicas.append(
                await stack.enter_async_context(
                    replica(sim, patcher=patchers[-1], instance=f"replica-{index}")
                )
            )
        value = now_stamp()
        await stamp(lk, value)
        async with asyncio.timeout(DEADLINE):
            await asyncio.gather(*(p.first_done.wait() for p in patchers))
        for each in replicas:
            await each.deployments.wait_for(functools.partial(copied, each.deployments, value))
        after = await get_deployment(lk)

    # Both replicas wrote the template in the same instant; the API server saw one change.
    assert [len(p.outcomes) for p in patchers] == [1, 1]
    assert all(outcome in (200, 422) for p in patchers for outcome in p.outcomes)
    assert after["metadata"]["generation"] == before + 1
    annotations = after["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"team": "platform", TEMPLATE_RESTARTED_AT_ANNOTATION: value}


async def test_completed_rollout_keeps_restarted_at_for_the_grace_period_then_clears_it(
    sim: KubeSim, lk: AsyncClient
) -> None:
    """Completion is reported at once; restarted-at stays, with completed-at, for the
    template's terminationGracePeriodSeconds (the replaced pod's detector reads it)."""
    sim.create(deployment_manifest(template_annotations=False, grace=1))
    async with replica(sim) as one:
        value = now_stamp()
        await stamp(lk, value)
        await one.deployments.wait_for(lambda: copied(one.deployments, value))
        assert carries(one.deployments, value)  # not complete yet: status still says gen 1

        await write_complete_status(lk)
        await one.deployments.wait_for(lambda: completion_recorded(one.deployments))
        assert carries(one.deployments, value)  # kept as evidence
        event = await wait_for_event(lk, DRAIN_COMPLETED)
        await one.deployments.wait_for(lambda: carries(one.deployments, None))
        describe = await kubectl(sim.kubeconfig_path, "describe", "deployment", NAME)

    assert event["type"] == "Normal"
    assert event["reportingComponent"] == REPORTING_CONTROLLER
    assert f"Rollout requested at {value} completed in " in event["message"]
    assert one.metrics.completed and one.metrics.completed[0] >= 0
    assert one.metrics.in_progress[-1] == 0
    raw = await get_deployment(lk)
    assert RESTARTED_AT_ANNOTATION not in (raw["metadata"].get("annotations") or {})
    assert COMPLETED_AT_ANNOTATION not in (raw["metadata"].get("annotations") or {})
    assert raw["spec"]["template"]["metadata"]["annotations"] == {
        TEMPLATE_RESTARTED_AT_ANNOTATION: value
    }
    assert DRAIN_COMPLETED in describe and REPORTING_CONTROLLER in describe


async def test_a_stale_view_neither_restarts_again_nor_removes_a_newer_stamp(
    sim: KubeSim, lk: AsyncClient
) -> None:
    """A replica whose cache lags: its writes fail their `test` ops (422) and change nothing."""
    sim.create(deployment_manifest(grace=1))
    first = now_stamp()
    first_at = parse_rfc3339(first)
    assert first_at is not None
    await stamp(lk, first)
    stamped_view = DeploymentInfo.from_object(await get_deployment(lk))

    async with replica(sim) as live:
        await live.deployments.wait_for(lambda: copied(live.deployments, first))
        await write_complete_status(lk)
        await live.deployments.wait_for(lambda: carries(live.deployments, None))
    done = await get_deployment(lk)

    stale = Reconciler(
        StaticDeployments(stamped_view), LightkubeDeploymentPatcher(lk), rollout_timeout=TIMEOUT,
        clock=lambda: first_at + timedelta(minutes=1),
    )  # fmt: skip
    result = await stale.reconcile(KEY)
    assert isinstance(result.step, CopyToTemplate) and result.already_done
    assert (await get_deployment(lk))["metadata"]["generation"] == done["metadata"]["generation"]

    # The stale replica believes the drain it saw is complete, while a newer one has started.
    second = format_rfc3339(first_at + timedelta(minutes=30))
    await stamp(lk, second)
    complete_view = DeploymentInfo.from_object(done)
    stale = Reconciler(
        StaticDeployments(_with_stamp(complete_view, first)), LightkubeDeploymentPatcher(lk),
        rollout_timeout=TIMEOUT, clock=lambda: first_at + timedelta(minutes=5),
    )  # fmt: skip
    result = await stale.reconcile(KEY)
    assert isinstance(result.step, Completed) and result.already_done
    annotations = (await get_deployment(lk))["metadata"]["annotations"]
    assert annotations[RESTARTED_AT_ANNOTATION] == second
    completed = [e for e in await events_about(lk) if e["reason"] == DRAIN_COMPLETED]
    assert len(completed) == 1  # the live replica's, for the first drain


async def test_timeout_is_a_timer_that_clears_restarted_at_with_a_warning(
    sim: KubeSim, lk: AsyncClient
) -> None:
    """Nothing changes on the Deployment after the copy (the rollout is stuck), so only the
    deadline timer can wake the reconciler. Its clock runs 10 minutes minus 2 s ahead of the
    stamp, so the 10-minute rolloutTimeout expires in about 2 s of real time."""
    sim.create(deployment_manifest())
    stamped_at = datetime.now(UTC).replace(microsecond=0)
    value = format_rfc3339(stamped_at)
    offset = TIMEOUT - timedelta(seconds=2) - (datetime.now(UTC) - stamped_at)

    def clock() -> datetime:
        return datetime.now(UTC) + offset

    async with replica(sim, clock=clock) as one:
        await stamp(lk, value)
        await one.deployments.wait_for(lambda: carries(one.deployments, None))
        event = await wait_for_event(lk, DRAIN_TIMEOUT)
        describe = await kubectl(sim.kubeconfig_path, "describe", "deployment", NAME)

    assert event["type"] == "Warning"
    assert (
        f"Rollout requested at {value} did not complete within rolloutTimeout 10m0s"
        in (event["message"])
    )
    assert len(one.metrics.timed_out) == 1 and not one.metrics.completed
    assert DRAIN_TIMEOUT in describe


async def test_a_restarted_reconciler_finishes_an_in_flight_drain(
    sim: KubeSim, lk: AsyncClient
) -> None:
    sim.create(deployment_manifest(grace=1))
    value = now_stamp()
    async with replica(sim, instance="before-restart") as first:
        await stamp(lk, value)
        await first.deployments.wait_for(lambda: copied(first.deployments, value))
    generation = (await get_deployment(lk))["metadata"]["generation"]

    await write_complete_status(lk)  # the rollout finishes while no controller runs

    async with replica(sim, instance="after-restart") as second:
        await second.deployments.wait_for(lambda: carries(second.deployments, None))
        event = await wait_for_event(lk, DRAIN_COMPLETED)

    assert event["reportingInstance"] == "after-restart"
    assert (await get_deployment(lk))["metadata"]["generation"] == generation  # no new rollout


async def test_stopped_reconciler_does_nothing_and_resumes_on_start(
    sim: KubeSim, lk: AsyncClient
) -> None:
    sim.create(deployment_manifest())
    async with replica(sim) as one:
        await one.reconciler.stop()
        value = now_stamp()
        await stamp(lk, value)
        await one.deployments.wait_for(lambda: carries(one.deployments, value))
        assert not copied(one.deployments, value)
        assert one.metrics.in_progress[-1] == 1  # tracked even while not reconciling

        await one.reconciler.start()
        await one.deployments.wait_for(lambda: copied(one.deployments, value))


async def test_with_leader_election_only_the_leader_reconciles(
    sim: KubeSim, lk: AsyncClient
) -> None:
    sim.create(deployment_manifest())
    async with (
        replica(sim, instance="replica-a", start_reconciler=False) as a,
        replica(sim, instance="replica-b", start_reconciler=False) as b,
    ):
        elector_a, elector_b = (
            LeaderElector(
                each.client,
                namespace=NS,
                name="graceful-drain",
                identity=identity,
                leading=each.reconciler,
                lease_duration=1.5,
                renew_deadline=1.0,
                retry_period=0.2,
            )
            for each, identity in ((a, "replica-a"), (b, "replica-b"))
        )
        try:
            await elector_a.start()
            async with asyncio.timeout(DEADLINE):
                await elector_a.wait_until_leader()
            await elector_b.start()

            first = now_stamp()
            await stamp(lk, first)
            await a.deployments.wait_for(lambda: copied(a.deployments, first))
            await write_complete_status(lk)
            event = await wait_for_event(lk, DRAIN_COMPLETED)
            assert event["reportingInstance"] == "replica-a"
            assert a.reconciler.running and not b.reconciler.running

            await elector_a.stop()  # a rolling update of the controller: the Lease moves on
            async with asyncio.timeout(DEADLINE):
                await elector_b.wait_until_leader()
            assert b.reconciler.running and not a.reconciler.running
            second = format_rfc3339(parse_rfc3339(first) + timedelta(seconds=1))
            await stamp(lk, second)
            await b.deployments.wait_for(lambda: copied(b.deployments, second))
        finally:
            await elector_b.stop()
            await elector_a.stop()


# --- helpers ----------------------------------------------------------------------------------


class StaticDeployments:
    """A cache frozen at one view of one Deployment."""

    def __init__(self, deployment: DeploymentInfo) -> None:
        self._deployment = deployment

    def get(self, namespace: str, name: str) -> DeploymentInfo | None:
        if (namespace, name) == (self._deployment.namespace, self._deployment.name):
            return self._deployment
        return None

    def items(self) -> list[DeploymentInfo]:
        return [self._deployment]

    def add_handler(self, handler: Any) -> None:
        pass


def _with_stamp(deployment: DeploymentInfo, value: str) -> DeploymentInfo:
    return replace(
        deployment, restarted_at_raw=value, restarted_at=parse_rfc3339(value),
        template_restarted_at=value,
    )  # fmt: skip


async def test_a_failed_reconcile_is_counted_and_retried(sim: KubeSim, lk: AsyncClient) -> None:
    """The API server refuses the copy twice (503): each failure is counted
    (graceful_drain_reconcile_errors_total, reconcile_total{result="error"}), none as terminal,
    and the retry then copies the stamp."""
    from kubesim.apiserver.faults import FaultRule

    sim.create(deployment_manifest())
    async with replica(sim, start_reconciler=False) as one:
        value = now_stamp()
        await stamp(lk, value)
        await one.deployments.wait_for(lambda: carries(one.deployments, value))
        sim.faults.add(FaultRule(verb="patch", resource="deployments", error_code=503, remaining=2))
        await one.reconciler.start()
        await one.deployments.wait_for(lambda: copied(one.deployments, value))
    counts = one.reconciler.counts
    assert counts.errors == counts.outcomes[Outcome.ERROR] == 2
    assert counts.terminal_errors == 0


class SignallingPatcher:
    """Patches through `inner`, recording each patch's outcome (200 or the refusal's status)
    in `outcomes`, a queue the test awaits."""

    def __init__(self, inner: LightkubeDeploymentPatcher) -> None:
        self._inner = inner
        self.outcomes: asyncio.Queue[int] = asyncio.Queue()

    async def patch_json(self, namespace: str, name: str, patch: JsonPatch) -> None:
        try:
            await self._inner.patch_json(namespace, name, patch)
        except ApiError as error:
            self.outcomes.put_nowait(error.status.code or 0)
            raise
        self.outcomes.put_nowait(200)


async def test_a_copy_refused_for_good_waits_for_the_deployment_to_change(
    sim: KubeSim, lk: AsyncClient
) -> None:
    """The API server refuses the copy with 400: a terminal error, counted as one; the same
    patch is not sent again until the Deployment changes (here a label), when the copy goes
    through."""
    from kubesim.apiserver.faults import FaultRule

    sim.create(deployment_manifest())
    value = now_stamp()
    await stamp(lk, value)
    patcher = SignallingPatcher(LightkubeDeploymentPatcher(lk))
    sim.faults.add(FaultRule(verb="patch", resource="deployments", error_code=400, remaining=1))
    async with replica(sim, patcher=patcher, start_reconciler=False) as one:
        await one.deployments.wait_for(lambda: carries(one.deployments, value))
        await one.reconciler.start()
        async with asyncio.timeout(DEADLINE):
            assert await patcher.outcomes.get() == 400
        counts = one.reconciler.counts
        assert (counts.terminal_errors, counts.errors) == (1, 1)
        await lk.patch(Deployment, NAME, {"metadata": {"labels": {"changed": "yes"}}},
                       namespace=NS, patch_type=PatchType.MERGE)  # fmt: skip
        async with asyncio.timeout(DEADLINE):
            assert await patcher.outcomes.get() == 200
        await one.deployments.wait_for(lambda: copied(one.deployments, value))
    assert patcher.outcomes.empty()
    assert (counts.terminal_errors, counts.errors) == (1, 1)
