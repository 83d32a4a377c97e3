"""Fault rows for hostile clients on the webhook port, against a real controller process.

One `graceful-drain controller` process runs as the applied Deployment runs it, started with
a soft open-file limit of 1,024 (a common container default; it raises it to the hard limit
and says so). Its webhook is attacked over real TLS on loopback while a prober posts real
eviction AdmissionReviews as the API server does (on a kept-alive connection, and on a new
connection each time); with `failurePolicy: Ignore` a review not answered is an eviction let
through unchecked, counted as "wrongly allowed". Each row states its bound and the value
measured from /proc: the process's open file descriptors, its resident memory.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from graceful_drain.controller.serving.connections import DEFAULT_MAX_CONNECTIONS
from graceful_drain.controller.serving.http import LISTEN_BACKLOG
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH
from kubesim.sim import KubeSim
from tests.e2e.controller.conftest import eviction_review
from tests.e2e.controller.drain_cluster import DrainCluster, drain_cluster
from tests.e2e.controller.installed import WORKLOADS
from tests.e2e.faults.processes import ControllerProcess, start_process
from tests.e2e.faults.suite import ROWS, FaultRow

pytestmark = pytest.mark.e2e

MB = 1_000_000
BOUND = 120.0  # every wait here is bounded by this
NEVER_TLS = 5_000
PIPELINING = DEFAULT_MAX_CONNECTIONS
PIPELINED_BYTES = 64 * 1024  # of requests each pipelining connection sends, reading nothing
PIPELINING_RSS_BOUND = 60 * MB
CHURNED = 20_000  # the old per-connection leak grew +115 MB by 20,000 (bound 50 MB)
CHURN_BATCH = 1_000
CHURN_TLS_EVERY = 25  # one in this many churned connections does TLS and begins a request
CHURN_RSS_BOUND = 50 * MB
# Besides the capped connections: the listening sockets, the API server's, the log pipe...
# measured before each attack; plus one accept backlog (accepted in one turn of the loop).
FD_MARGIN = LISTEN_BACKLOG


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


@dataclass
class Peak:
    """The highest value of `read` seen, sampled every turn of the test's loop it gets."""

    read: Callable[[], int]
    value: int = 0
    _task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self.value = max(self.value, self.read())
            await asyncio.sleep(0.01)  # a sampling period, not a synchronisation

    def __enter__(self) -> Peak:
        self.value = self.read()
        self._task = asyncio.create_task(self._sample())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        self.value = max(self.value, self.read())


@dataclass
class Prober:
    """Posts an eviction review every PERIOD, alternately on a kept-alive connection (as the
    API server does) and on a new one, and counts the answers."""

    url: str
    context: ssl.SSLContext
    answered: int = 0
    unanswered: list[str] = field(default_factory=list)
    fresh_answered: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    PERIOD = 0.05

    async def run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=10)  # the webhook's timeoutSeconds
        kept = aiohttp.TCPConnector(ssl=self.context, limit=1)
        fresh = aiohttp.TCPConnector(ssl=self.context, force_close=True)
        async with (
            aiohttp.ClientSession(connector=kept, timeout=timeout) as kept_alive,
            aiohttp.ClientSession(connector=fresh, timeout=timeout) as new_each_time,
        ):
            for n in range(10**9):
                session = new_each_time if n % 2 else kept_alive
                await self._review(session, fresh=bool(n % 2))
                await asyncio.sleep(self.PERIOD)  # the pace of the probes

    async def _review(self, session: aiohttp.ClientSession, *, fresh: bool) -> None:
        body = json.dumps(eviction_review(WORKLOADS, "no-such-pod")).encode()
        try:
            async with session.post(self.url, data=body) as response:
                review = await response.json(content_type=None)
                ok = response.status == 200 and "allowed" in review["response"]
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError, ValueError) as error:
            ok, problem = False, f"{'new' if fresh else 'kept'}: {error!r}"
        else:
            problem = "" if ok else f"status {response.status}"
        async with self._changed:
            if ok:
                self.answered += 1
                self.fresh_answered += fresh
            else:
                self.unanswered.append(problem)
            self._changed.notify_all()

    async def answered_more(self, count: int) -> None:
        """Until `count` more reviews have been answered."""
        target = self.answered + count
        async with asyncio.timeout(BOUND), self._changed:
            await self._changed.wait_for(lambda: self.answered >= target)


@dataclass
class Target:
    cluster: DrainCluster
    controller: ControllerProcess
    port: int
    context: ssl.SSLContext

    @property
    def pid(self) -> int:
        return self.controller.process.pid


@asynccontextmanager
async def controller(sim: KubeSim, tmp_path: Path) -> AsyncIterator[Target]:
    async with drain_cluster(sim, tmp_path) as cluster:
        process, port = await start_process(cluster, "graceful-drain-0", soft_open_files=1024)
        try:
            await cluster.until_ca_bundle_published()
            [hook] = (await cluster.webhook_configuration())["webhooks"]
            ca = base64.b64decode(hook["clientConfig"]["caBundle"]).decode()
            context = ssl.create_default_context(cadata=ca)
            context.check_hostname = False
            yield Target(cluster, process, port, context)
        finally:
            await process.stop()


async def under_attack(
    target: Target, name: str, attack: Callable[[Prober], Awaitable[str]], note: str
) -> FaultRow:
    """Run `attack` (which returns the measured part of the note) while the prober reviews;
    the row survives when every review on the kept-alive connection was answered and the
    process is still running."""
    prober = Prober(f"https://127.0.0.1:{target.port}{WEBHOOK_PATH}", target.context)
    probing = asyncio.create_task(prober.run())
    began = time.monotonic()
    try:
        await prober.answered_more(2)
        measured = await attack(prober)
        await prober.answered_more(4)  # and after it
    finally:
        probing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probing
    # the API server's reused connections: every review answered; a new connection can
    # also wait out the accept queue while the loop is busy (counted, not excused)
    kept_unanswered = [problem for problem in prober.unanswered if problem.startswith("kept")]
    survived = target.controller.process.returncode is None and not kept_unanswered
    print(name, f"{time.monotonic() - began:.1f} s", prober.unanswered, os.getloadavg())
    row = FaultRow(name, survived, len(prober.unanswered), 0, None, None,
                   f"{measured}; {prober.answered} reviews answered "
                   f"({prober.fresh_answered} on new connections); {note}")  # fmt: skip
    ROWS.append(row)
    return row


async def tcp_connection(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


async def gather_bounded(count: int, width: int, make: Callable[[int], Awaitable[None]]) -> None:
    """make(0..count-1), at most `width` at a time."""
    gate = asyncio.Semaphore(width)

    async def one(i: int) -> None:
        async with gate:
            await make(i)

    await asyncio.gather(*(one(i) for i in range(count)))


async def test_hostile_clients_on_the_webhook_port(sim: KubeSim, tmp_path: Path) -> None:
    started = time.monotonic()
    async with controller(sim, tmp_path) as target:
        [limit] = [r for r in target.controller.logs if r.get("msg") == "open-file limit"]
        assert limit["soft_at_start"] == 1024 and limit["soft"] == limit["hard"], limit
        await never_tls(target)
        await pipelining(target)
        await churn(target)
    print(f"hostile clients: {time.monotonic() - started:.1f} s")


async def never_tls(target: Target) -> None:
    base = open_fds(target.pid)
    bound = base + DEFAULT_MAX_CONNECTIONS + FD_MARGIN
    sockets: list[socket.socket] = []

    async def attack(prober: Prober) -> str:
        async def connect(i: int) -> None:
            with contextlib.suppress(OSError):  # refused while the backlog is full: retried
                sockets.append(await tcp_connection(target.port))

        with Peak(lambda: open_fds(target.pid)) as peak:
            await gather_bounded(NEVER_TLS, 200, connect)
            await prober.answered_more(10)  # all of them open (or evicted) meanwhile
        for sock in sockets:
            sock.close()
        assert peak.value <= bound, (peak.value, bound)
        return f"{len(sockets)} connected; controller FDs peak {peak.value} ≤ {bound}"

    row = await under_attack(target, f"{NEVER_TLS:,} connections that never start TLS", attack,
                             f"bound: FDs at start ({base}) + cap {DEFAULT_MAX_CONNECTIONS} "
                             f"+ accept backlog {LISTEN_BACKLOG}")  # fmt: skip
    assert row.survived and row.wrongly_allowed_during == 0, row


async def pipelining(target: Target) -> None:
    one = b"GET " + WEBHOOK_PATH.encode() + b" HTTP/1.1\r\nHost: webhook\r\n\r\n"
    payload = one * (PIPELINED_BYTES // len(one))
    writers: list[asyncio.StreamWriter] = []

    async def attack(prober: Prober) -> str:
        async def connect(i: int) -> None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # answers pile up
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", target.port))
            _, writer = await asyncio.open_connection(sock=sock, ssl=target.context,
                                                      server_hostname="127.0.0.1")  # fmt: skip
            writer.write(payload)  # and no answer read
            writers.append(writer)

        before = rss(target.pid)
        with Peak(lambda: rss(target.pid)) as peak:
            async with asyncio.timeout(BOUND):
                await gather_bounded(PIPELINING, 64, connect)
            await prober.answered_more(6)  # the server reads what it will meanwhile
        for writer in writers:
            writer.transport.abort()
        growth = peak.value - before
        assert growth <= PIPELINING_RSS_BOUND, (growth, PIPELINING_RSS_BOUND)
        return (f"RSS {before / MB:.0f} MB → peak {peak.value / MB:.0f} MB: "
                f"+{growth / MB:.1f} MB ≤ {PIPELINING_RSS_BOUND / MB:.0f}")  # fmt: skip

    row = await under_attack(
        target, f"{PIPELINING} connections pipelining requests, reading no answer", attack,
        f"{PIPELINED_BYTES // 1024} KiB of requests each",
    )  # fmt: skip
    assert row.survived, row


async def churn(target: Target) -> None:
    head = b"POST " + WEBHOOK_PATH.encode() + b" HTTP/1.1\r\nHost: webhook\r\nX-Slow: "

    async def attack(prober: Prober) -> str:
        async def slow(i: int) -> None:
            with contextlib.suppress(OSError, ssl.SSLError):
                if i % CHURN_TLS_EVERY:
                    sock = await tcp_connection(target.port)
                    sock.close()  # after a look: the server accepted it, or will
                    return
                async with asyncio.timeout(BOUND):
                    _, writer = await asyncio.open_connection(
                        "127.0.0.1", target.port, ssl=target.context
                    )
                writer.write(head)
                writer.transport.abort()

        before = rss(target.pid)
        base_fds = open_fds(target.pid)
        for start in range(0, CHURNED, CHURN_BATCH):
            await asyncio.gather(*(slow(i) for i in range(start, start + CHURN_BATCH)))
        await prober.answered_more(10)
        after = rss(target.pid)
        assert after - before <= CHURN_RSS_BOUND, (after - before, CHURN_RSS_BOUND)
        return (f"RSS {before / MB:.0f} MB before, {after / MB:.0f} MB after: "
                f"{(after - before) / MB:+.1f} MB (bound ±{CHURN_RSS_BOUND / MB:.0f}); FDs "
                f"{base_fds} before, {open_fds(target.pid)} after")  # fmt: skip

    row = await under_attack(
        target, f"{CHURNED:,} slow connections churned, {CHURN_BATCH:,} at a time", attack,
        f"one in {CHURN_TLS_EVERY} does TLS and begins a request, the others connect and go",
    )  # fmt: skip
    assert row.survived, row
