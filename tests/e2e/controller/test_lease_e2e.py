"""Leader election over a coordination.k8s.io/v1 Lease in kubesim: acquisition, handover."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest
from lightkube import AsyncClient
from lightkube.resources.coordination_v1 import Lease

from graceful_drain.kube.lease import LeaderElector
from kubesim.sim import KubeSim

from .conftest import DEADLINE
from .deployments import NS, lightkube_client

pytestmark = pytest.mark.e2e

LEASE = "graceful-drain"


@dataclass
class Leading:
    """Stands in for the reconciler: records when it is started and stopped."""

    name: str
    starts: int = 0
    stops: int = 0

    @property
    def running(self) -> bool:
        return self.starts > self.stops

    async def start(self) -> None:
        self.starts += 1

    async def stop(self) -> None:
        self.stops += 1


def elector_for(
    client: AsyncClient, identity: str, leading: Leading | None = None
) -> LeaderElector:
    """Short periods keep the tests quick; the order is client-go's (15 > 10 > 2)."""
    return LeaderElector(
        client, namespace=NS, name=LEASE, identity=identity, leading=leading,
        lease_duration=1.5, renew_deadline=1.0, retry_period=0.2,
    )  # fmt: skip


@pytest.fixture
async def electors(sim: KubeSim) -> AsyncIterator[tuple[LeaderElector, LeaderElector]]:
    async with AsyncExitStack() as stack:
        pair = []
        for identity in ("replica-a", "replica-b"):
            client = lightkube_client(sim)
            stack.push_async_callback(client.close)
            elector = elector_for(client, identity, Leading(identity))
            stack.push_async_callback(elector.stop)
            pair.append(elector)
        yield pair[0], pair[1]


def leading_of(elector: LeaderElector) -> Leading:
    leading = elector._leading
    assert isinstance(leading, Leading)
    return leading


async def lead(elector: LeaderElector) -> None:
    """Start `elector` and wait until it holds the Lease."""
    await elector.start()
    async with asyncio.timeout(DEADLINE):
        await elector.wait_until_leader()


async def lease_spec(client: AsyncClient) -> dict[str, object]:
    lease = await client.get(Lease, LEASE, namespace=NS)
    spec: dict[str, object] = lease.spec.to_dict()
    return spec


async def test_first_elector_creates_and_holds_the_lease(
    electors: tuple[LeaderElector, LeaderElector], lk: AsyncClient
) -> None:
    a, _ = electors
    await lead(a)

    spec = await lease_spec(lk)
    assert spec["holderIdentity"] == "replica-a"
    assert spec["leaseDurationSeconds"] == 2  # 1.5 s rounds to whole seconds
    assert spec["leaseTransitions"] == 0
    assert leading_of(a).running


@pytest.mark.parametrize(
    ("leave", "named_after"),
    [
        # Releases: holder "", leaseDurationSeconds 1, so the other may hold it already.
        pytest.param(LeaderElector.stop, {"", "replica-b"}, id="released-on-stop"),
        # No release: the Lease names replica-a until it expires.
        pytest.param(LeaderElector.abandon, {"replica-a"}, id="crashed"),
    ],
)
async def test_the_other_replica_takes_over_when_the_leader_goes(
    electors: tuple[LeaderElector, LeaderElector], lk: AsyncClient,
    leave: Callable[[LeaderElector], Awaitable[None]], named_after: set[str],
) -> None:  # fmt: skip
    """A leader that stops hands over at once; a crashed one is replaced once its Lease
    expires."""
    a, b = electors
    await lead(a)
    await b.start()

    await leave(a)
    assert not leading_of(a).running and leading_of(a).stops == 1
    assert (await lease_spec(lk))["holderIdentity"] in named_after
    async with asyncio.timeout(DEADLINE):
        await b.wait_until_leader()

    spec = await lease_spec(lk)
    assert spec["holderIdentity"] == "replica-b"
    assert spec["leaseTransitions"] == 1
    assert leading_of(b).running


async def test_a_live_leader_keeps_the_lease_while_the_other_waits(
    electors: tuple[LeaderElector, LeaderElector], lk: AsyncClient
) -> None:
    a, b = electors
    await lead(a)
    await b.start()
    first = await lease_spec(lk)

    # Watch the leader renew 10 times (each rewrites renewTime): longer than a lease lasts.
    seen = {first["renewTime"]}
    async with asyncio.timeout(DEADLINE):
        async for _, lease in lk.watch(Lease, namespace=NS):
            seen.add(lease.spec.to_dict()["renewTime"])
            if len(seen) > 10:
                break

    assert a.is_leader and not b.is_leader
    assert b.observed_holder == "replica-a"
    assert (await lease_spec(lk))["holderIdentity"] == "replica-a"
    assert not leading_of(b).running


async def test_the_elector_survives_an_api_outage(sim: KubeSim, lk: AsyncClient) -> None:
    """Failed requests are lost rounds, never crashes; leadership resumes with the API."""
    from kubesim.apiserver.faults import FaultRule

    rule = sim.faults.add(FaultRule(resource="leases", error_code=503, remaining=5))
    client = lightkube_client(sim)
    elector = elector_for(client, "solo")
    try:
        await lead(elector)
    finally:
        await elector.stop()
        await client.close()
    assert rule.remaining == 0
    assert (await lease_spec(lk))["holderIdentity"] == ""  # released on stop
