"""The webhook's budget counts from when a request reached it (issue 37; docs/decisions.md,
"The webhook's budget"), on kubesim: graceful-drain installed from deploy/, kubesim calling
its webhook over TLS through the applied configuration (with the `?timeout=` it derives
from `timeoutSeconds`, failing open past it as the shipped `failurePolicy: Ignore` says).

A relay in front of the replica (tests/e2e/holdingrelay.py) holds a new connection's bytes
after the replica accepted it, while the test moves the replica's monotonic clock on: the
request then reaches the webhook's handler with most of its budget spent, as under a burst
that starved the controller of CPU. It must be held (`budget-spent`) without a write, in
time for the API server, and the drain client's next attempt must start the rollout.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from kubesim.sim import KubeSim
from tests.e2e.holdingrelay import Held, Hold, HoldingRelay
from tests.e2e.watching import annotations_of

from .counting_guard import CountingGuard
from .drain_cluster import DrainCluster, drain_cluster
from .installed import BOUND, WEBHOOK_CONFIGURATION, WORKLOADS
from .replica import Replica
from .test_ledger_e2e import evict, evict_until_done

pytestmark = pytest.mark.e2e


@dataclass
class Clock:
    """The replica's monotonic clock: the real one, moved on by the test."""

    offset: float = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


@dataclass
class Setup:
    cluster: DrainCluster
    replica: Replica
    clock: Clock
    guard: CountingGuard
    relays: list[HoldingRelay] = field(default_factory=list)

    def waiting(self, seconds: float) -> Hold:
        """A hold that lets the connection through once the webhook has accepted it and its
        clock has moved on by `seconds`: what the request spent queued."""
        accepted = self.guard.accepted + 1

        async def hold(_: Held) -> None:
            await self.guard.until_accepted(accepted)
            self.clock.offset += seconds

        return hold

    async def fresh_relay(self, hold: Hold) -> HoldingRelay:
        """A relay on a port of its own, holding each new connection: kubesim has no
        connection to it yet, so the next webhook call opens one (and is held)."""
        relay = await HoldingRelay(hold=hold).start()
        relay.add(self.replica.webhook_port)
        self.relays.append(relay)
        await self.cluster.route_to_ports(relay.port)
        return relay


async def held_then_drained(setup: Setup, name: str, waited: float) -> None:
    """The eviction of `name`'s pod, its request held `waited` seconds after the webhook's
    accept: answered 429 `budget-spent`, nothing written; the client's retries start the
    rollout and complete the eviction, with 0 s without a Ready pod."""
    cluster, replica = setup.cluster, setup.replica
    await cluster.create_web(name, ready_delay="1s")
    [pod] = [p["metadata"]["name"] for p in await cluster.pods(name)]
    relay = await setup.fresh_relay(setup.waiting(waited))
    spent = replica.decisions("budget-spent", allowed=False)
    answering = replica.answering_seconds()
    start = cluster.recorder.clock()

    code, message = await evict(cluster.admin, pod)

    assert relay.held == 1, "the webhook call went through a held connection"
    assert code == 429, message
    assert "could not be made before the API server's webhook timeout" in message, message
    assert replica.decisions("budget-spent", allowed=False) == spent + 1
    # the time it waited counts in the answer's duration, as the API server's timeout counts
    assert replica.answering_seconds() - answering >= waited
    assert RESTARTED_AT_ANNOTATION not in annotations_of(await cluster.deployment(name))
    relay.hold = None  # the retries: read at once
    answers = await evict_until_done(cluster.admin, pod)
    assert answers[-1] in (201, 404), answers
    await cluster.until(lambda: cluster.recorder.ready(name, WORKLOADS) >= 1)
    window = (start, cluster.recorder.clock())
    assert cluster.zero_ready_seconds(window, name) == 0
    assert len(cluster.rollouts(window, name)) == 1


async def test_a_review_read_too_late_to_write_in_time_is_held_without_a_write(
    sim: KubeSim, tmp_path: Path
) -> None:
    """With the shipped timeoutSeconds 5 (`?timeout=5s`), a request held 4.6 s after the
    accept has under 0.5 s of its 4 s budget left: held. With timeoutSeconds 2
    (`?timeout=2s`), 0.6 s is enough: its budget is 2 - 1 s. Before, the budget counted 4 s
    from the handler, whatever the API server's timeout: the stamp was written and the
    answer could come after the API server had let the eviction through."""
    clock, guard = Clock(), CountingGuard(BOUND)
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica(
            route=False, app_options={"monotonic": clock, "connection_guard": guard}
        )
        setup = Setup(cluster, replica, clock, guard)
        try:
            await held_then_drained(setup, "queued", waited=4.6)
            patched = await cluster.kubectl(
                "patch", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION, "--type=json",
                "-p", json.dumps([{"op": "replace", "path": "/webhooks/0/timeoutSeconds",
                                   "value": 2}]),
            )  # fmt: skip
            assert patched.code == 0, patched.stderr
            await held_then_drained(setup, "short", waited=0.6)
        finally:
            for relay in setup.relays:
                await relay.stop()
