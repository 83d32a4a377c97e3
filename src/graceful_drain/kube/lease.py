"""`--leader-elect`: a coordination.k8s.io/v1 Lease decides which replica reconciles.

    elector = LeaderElector(client, namespace="graceful-drain", name="graceful-drain",
                            identity=pod_name, leading=reconciler)
    await elector.start()     # a component; the webhook keeps serving on every replica
    ...
    await elector.stop()      # stops `leading` and releases the Lease for a fast handover

After client-go's tools/leaderelection (leaderelection.go): try to acquire every retry period
(jittered by 1.2), then renew every retry period; a renewal that has not succeeded within the
renew deadline ends leadership. Another holder's Lease is respected until `leaseDurationSeconds`
after this replica last saw the record change (measured on its own monotonic clock, so clocks
need not agree). Writes are optimistic: an update carries the resourceVersion it read, and a
409 is simply a lost round. Releasing writes an empty holder with a 1-second duration.
Defaults are client-go's: lease 15 s, renew deadline 10 s, retry 2 s.

Correctness never depends on this: every reconciler write is a `test`-guarded patch, so two
replicas that both believe they lead (a partition, a paused process) still produce one rollout.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from graceful_drain.kube.client import error_detail, http_status
from graceful_drain.kube.meta import HTTP_CONFLICT, HTTP_NOT_FOUND, utc_now
from graceful_drain.logs import get_logger

LEASE_DURATION_SECONDS = 15.0
RENEW_DEADLINE_SECONDS = 10.0
RETRY_PERIOD_SECONDS = 2.0
JITTER_FACTOR = 1.2  # client-go JitterUntil(..., RetryPeriod, JitterFactor=1.2, ...)
RELEASED_LEASE_DURATION_SECONDS = 1

_log = get_logger("leader-election")


class Leading(Protocol):
    """What runs only on the leader (the reconciler): a component."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


# --- the pure part: whose Lease is it, and what do we write ----------------------------------


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str  # "" once released
    duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int

    @classmethod
    def of(cls, lease: Lease) -> LeaseRecord:
        spec = lease.spec or LeaseSpec()
        return cls(
            holder=spec.holderIdentity or "",
            duration_seconds=spec.leaseDurationSeconds or 0,
            acquire_time=spec.acquireTime,
            renew_time=spec.renewTime,
            transitions=spec.leaseTransitions or 0,
        )

    def spec(self) -> LeaseSpec:
        return LeaseSpec(
            holderIdentity=self.holder,
            leaseDurationSeconds=self.duration_seconds,
            acquireTime=self.acquire_time,
            renewTime=self.renew_time,
            leaseTransitions=self.transitions,
        )


Verdict = Literal["held-by-another", "renew", "take-over"]


def judge(record: LeaseRecord, identity: str, observed_at: float, now: float) -> Verdict:
    """Whether `identity` may write the Lease: its own (renew), free or expired (take over).

    `observed_at` is when this replica first saw `record` (monotonic seconds), `now` the same
    clock now: validity is local observation plus the record's own duration, as client-go's
    isLeaseValid.
    """
    if record.holder == identity:
        return "renew"
    if record.holder and observed_at + record.duration_seconds > now:
        return "held-by-another"
    return "take-over"


def claimed(
    record: LeaseRecord | None, identity: str, duration_seconds: int, now: datetime
) -> LeaseRecord:
    """The record `identity` writes to hold the Lease from `now` (a renewal keeps the acquire
    time and the transition count; a take-over counts one more transition)."""
    if record is not None and record.holder == identity:
        return LeaseRecord(
            identity, duration_seconds, record.acquire_time or now, now, record.transitions
        )
    transitions = 0 if record is None else record.transitions + 1
    return LeaseRecord(identity, duration_seconds, now, now, transitions)


def released(record: LeaseRecord, now: datetime) -> LeaseRecord:
    """client-go release(): no holder, a 1-second duration, so the next candidate need not wait."""
    return LeaseRecord("", RELEASED_LEASE_DURATION_SECONDS, now, now, record.transitions)


# --- the elector ------------------------------------------------------------------------------


class LeaderElector:
    name = "leader-election"

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        leading: Leading | None = None,
        lease_duration: float = LEASE_DURATION_SECONDS,
        renew_deadline: float = RENEW_DEADLINE_SECONDS,
        retry_period: float = RETRY_PERIOD_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = utc_now,
        rng: random.Random | None = None,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry period < renew deadline < lease duration")
        self._client = client
        self.namespace = namespace
        self.lease_name = name
        self.identity = identity
        self._leading = leading
        self._duration_seconds = max(1, round(lease_duration))
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._monotonic = monotonic
        self._wall = wall
        self._rng = rng or random.Random()
        self._observed: LeaseRecord | None = None
        self._observed_version: str | None = None
        self._observed_at = 0.0
        self._is_leader = False
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.transitions_seen = 0  # times this replica became leader

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def observed_holder(self) -> str | None:
        return None if self._observed is None else self._observed.holder

    async def wait_until_leader(self, leader: bool = True) -> None:
        """Until this replica's leadership is `leader` (bound it with asyncio.timeout)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._is_leader == leader)

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="leader-election")

    async def stop(self) -> None:
        """Stop leading (the `leading` component first), then release the Lease."""
        if await self._halt():
            await self._release()

    async def abandon(self) -> None:
        """Stop without releasing, as a crashed replica would (tests, and SIGKILL semantics)."""
        await self._halt()

    async def _halt(self) -> bool:
        """End the election loop and stop leading; whether this replica was leading."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if not self._is_leader:
            return False
        await self._set_leader(False)
        return True

    # --- the loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._acquire()
            await self._set_leader(True)
            await self._renew_until_lost()
            await self._set_leader(False)

    async def _acquire(self) -> None:
        while True:
            if await self._attempt(self._renew_deadline):
                return
            await asyncio.sleep(self._jittered(self._retry_period))

    async def _renew_until_lost(self) -> None:
        while True:
            await asyncio.sleep(self._retry_period)
            deadline = self._monotonic() + self._renew_deadline
            while not await self._attempt(deadline - self._monotonic()):
                remaining = deadline - self._monotonic()
                if remaining <= 0:
                    _log.warning("failed to renew the lease in time; stopping leading",
                                 lease=self.lease_name, identity=self.identity)  # fmt: skip
                    return
                await asyncio.sleep(min(self._retry_period, remaining))

    def _jittered(self, period: float) -> float:
        return period * (1 + self._rng.random() * JITTER_FACTOR)

    async def _attempt(self, budget: float) -> bool:
        """One tryAcquireOrRenew within `budget` seconds; False on any failure."""
        if budget <= 0:
            return False
        try:
            async with asyncio.timeout(budget):
                return await self._try_acquire_or_renew()
        except TimeoutError:
            return False
        except Exception as error:
            _log.warning("lease request failed", lease=self.lease_name, error=error_detail(error))
            return False

    async def _try_acquire_or_renew(self) -> bool:
        now = self._wall()
        try:
            lease = await self._client.get(Lease, self.lease_name, namespace=self.namespace)
        except ApiError as error:
            if http_status(error) != HTTP_NOT_FOUND:
                raise
            return await self._create(claimed(None, self.identity, self._duration_seconds, now))

        record = LeaseRecord.of(lease)
        version = lease.metadata.resourceVersion if lease.metadata else None
        if record != self._observed:
            self._observed, self._observed_at = record, self._monotonic()
        self._observed_version = version
        verdict = judge(record, self.identity, self._observed_at, self._monotonic())
        if verdict == "held-by-another":
            return False
        if verdict == "take-over" and self._is_leader:
            # Someone released or overwrote our Lease: do not renew a claim that was lost.
            return False
        new = claimed(record, self.identity, self._duration_seconds, now)
        return await self._update(new, version)

    async def _create(self, record: LeaseRecord) -> bool:
        lease = Lease(
            metadata=ObjectMeta(name=self.lease_name, namespace=self.namespace),
            spec=record.spec(),
        )
        try:
            created = await self._client.create(lease)
        except ApiError as error:
            if http_status(error) == HTTP_CONFLICT:  # another replica created it first
                return False
            raise
        self._remember(record, created)
        return True

    async def _update(self, record: LeaseRecord, version: str | None) -> bool:
        lease = Lease(
            metadata=ObjectMeta(
                name=self.lease_name, namespace=self.namespace, resourceVersion=version
            ),
            spec=record.spec(),
        )
        try:
            updated = await self._client.replace(lease)
        except ApiError as error:
            if http_status(error) == HTTP_CONFLICT:  # written by someone else since we read it
                return False
            raise
        self._remember(record, updated)
        return True

    def _remember(self, record: LeaseRecord, lease: Lease) -> None:
        self._observed, self._observed_at = record, self._monotonic()
        self._observed_version = lease.metadata.resourceVersion if lease.metadata else None

    async def _release(self) -> None:
        if self._observed is None or self._observed.holder != self.identity:
            return
        try:
            async with asyncio.timeout(self._renew_deadline):
                await self._update(released(self._observed, self._wall()), self._observed_version)
            _log.info("lease released", lease=self.lease_name, identity=self.identity)
        except Exception as error:  # the Lease then expires on its own
            _log.warning("could not release the lease", lease=self.lease_name,
                         error=error_detail(error))  # fmt: skip

    async def _set_leader(self, leader: bool) -> None:
        if leader == self._is_leader:
            return
        if leader:
            self.transitions_seen += 1
            _log.info("became leader", lease=self.lease_name, identity=self.identity)
        else:
            _log.info("stopped leading", lease=self.lease_name, identity=self.identity)
        self._is_leader = leader
        if self._leading is not None:
            try:
                await (self._leading.start() if leader else self._leading.stop())
            except Exception as error:
                _log.error("leading component failed to " + ("start" if leader else "stop"),
                           error=error_detail(error))  # fmt: skip
        async with self._changed:
            self._changed.notify_all()
