"""Fault rows for hostile clients on the webhook port, against a real controller process.

One `graceful-drain controller` process runs as the applied Deployment runs it, started with
a soft open-file limit of 1,024 (a common container default; it raises it to the hard limit
and says so). Its webhook is attacked over real TLS on loopback while real eviction
AdmissionReviews are posted as the API server does: REVIEWS_PER_SECOND of them on kept-alive
connections (`RateProber`: at least ANSWERED_SHARE must be answered within TIMEOUT_SECONDS),
or for the churn row one at a time, alternately on a kept-alive connection and on a new one
(`Prober`). With `failurePolicy: Ignore` a review not answered in time is an eviction let
through unchecked, counted as "wrongly allowed". Each row states its bound and the value
measured: the process's open file descriptors and resident memory (from /proc), and the
connections it closed, by why (from its /metrics). Each row's duration is printed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import resource
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import aiohttp
import pytest
from bench.objects import eviction_review

from graceful_drain.controller.serving.connections import DEFAULT_MAX_CONNECTIONS
from graceful_drain.controller.serving.http import LISTEN_BACKLOG
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH
from kubesim.sim import KubeSim
from tests.e2e.controller.drain_cluster import DrainCluster, drain_cluster
from tests.e2e.controller.installed import WORKLOADS
from tests.e2e.faults.processes import ControllerProcess, start_process
from tests.e2e.faults.suite import ROWS, FaultRow

pytestmark = pytest.mark.e2e

MB = 1_000_000
BOUND = 120.0  # every wait here is bounded by this
NEVER_TLS = 10_000
NEVER_TLS_RSS_BOUND = 16 * MB  # the controller's RSS, at its peak, over what it was before
PIPELINING = 50
PIPELINED_BYTES = 1024 * 1024  # of requests each pipelining connection sends, reading nothing
PIPELINING_RSS_BOUND = 40 * MB
# What each takes of its answers before reading none (its choice: a larger buffer fills later,
# the same answers per turn of the server's loop)
UNREAD_BUFFER_BYTES = 16 * 1024
NEWCOMERS = DEFAULT_MAX_CONNECTIONS + 8  # each sends one review, reads its answer and idles
KEPT_EVERY = 100  # newcomers between two reviews on the kept-alive connection
# The background reviews, as the API server sends them, and what each must meet.
REVIEWS_PER_SECOND = 50
TIMEOUT_SECONDS = 5.0  # the webhook's timeoutSeconds: a review answered later is let through
ANSWERED_SHARE = 0.99
SCRAPE_PERIOD = 0.2
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


def review_body() -> bytes:
    """A real eviction AdmissionReview, of a dry run: the webhook answers it without a
    lookup, so what the rows with a review rate measure is the server's share of the loop,
    not kubesim's latency (it runs in this process, beside the attackers)."""
    return json.dumps(eviction_review(WORKLOADS, "no-such-pod", dry_run=True)).encode()


@dataclass
class RateProber:
    """Posts REVIEWS_PER_SECOND eviction reviews (`review_body`), each at its own time
    whatever became of the ones before (as the API server does for as many evictions), on
    kept-alive connections opened as needed; records how long each took to be answered, or
    why it was not."""

    url: str
    context: ssl.SSLContext
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
        connector = aiohttp.TCPConnector(ssl=self.context, limit=0)
        loop = asyncio.get_running_loop()
        reviews: list[asyncio.Task[None]] = []
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            began = loop.time()
            for n in range(10**9):
                pace = max(0.0, began + n / REVIEWS_PER_SECOND - loop.time())
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(pace):  # the next review's time, unless stopped
                        await self._stop.wait()
                if self._stop.is_set():
                    break
                reviews.append(asyncio.create_task(self._review(session)))
            await asyncio.gather(*reviews)  # each bounded by its timeout

    def stop(self) -> None:
        self._stop.set()

    async def _review(self, session: aiohttp.ClientSession) -> None:
        body = review_body()
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            async with session.post(self.url, data=body) as response:
                review = await response.json(content_type=None)
                problem = "" if response.status == 200 and "allowed" in review["response"] \
                    else f"status {response.status}"  # fmt: skip
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError, ValueError) as error:
            problem = repr(error)
        if problem:
            self.failures.append(problem)
        else:
            self.latencies.append(loop.time() - began)

    @property
    def sent(self) -> int:
        return len(self.latencies) + len(self.failures)

    @property
    def in_time(self) -> int:
        return sum(latency <= TIMEOUT_SECONDS for latency in self.latencies)


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


async def under_rate(
    target: Target, name: str, attack: Callable[[], Awaitable[str]], note: str
) -> FaultRow:
    """Run `attack` (which returns the measured part of the note) while REVIEWS_PER_SECOND
    reviews are posted; the row survives when at least ANSWERED_SHARE of them were answered
    within TIMEOUT_SECONDS and the process is still running. Each review not answered in
    time is an eviction let through unchecked (failurePolicy: Ignore)."""
    prober = RateProber(f"https://127.0.0.1:{target.port}{WEBHOOK_PATH}", target.context)
    probing = asyncio.create_task(prober.run())
    began = time.monotonic()
    try:
        measured = await attack()
    finally:
        prober.stop()
        await probing
    seconds = time.monotonic() - began
    late = prober.sent - prober.in_time
    share = prober.in_time / max(1, prober.sent)
    slowest = max(prober.latencies, default=0.0)
    survived = target.controller.process.returncode is None and share >= ANSWERED_SHARE
    print(name, f"{seconds:.1f} s", f"{prober.in_time}/{prober.sent} in time",
          f"slowest {slowest:.2f} s", prober.failures[:5], os.getloadavg())  # fmt: skip
    row = FaultRow(name, survived, late, 0, None, None,
                   f"{measured}; {prober.in_time} of {prober.sent} reviews "
                   f"({REVIEWS_PER_SECOND}/s) answered within {TIMEOUT_SECONDS:g} s "
                   f"({share:.1%}, slowest {slowest:.2f} s, {seconds:.0f} s); {note}")  # fmt: skip
    ROWS.append(row)
    return row


async def closed_by_server(target: Target) -> dict[str, float]:
    """graceful_drain_webhook_connections_closed_total by `why`, from the process's /metrics."""
    url = f"http://127.0.0.1:{target.controller.metrics_port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    prefix = 'graceful_drain_webhook_connections_closed_total{why="'
    return {
        line[len(prefix) :].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(prefix)
    }


async def until_closed(target: Target, why: str, count: float) -> None:
    """Until the server has closed `count` connections for `why` (bounded by BOUND)."""
    for _ in range(int(BOUND / SCRAPE_PERIOD)):
        if (await closed_by_server(target))[why] >= count:
            return
        await asyncio.sleep(SCRAPE_PERIOD)  # the pace of the scrapes
    raise AssertionError(f"not {count:.0f} closed for {why} within {BOUND} s")


def raise_open_file_limit(needed: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE to `needed` if the hard limit allows; the
    number of files it may then open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft


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
        for case in (never_tls, newcomers, pipelining, churn):
            began = time.monotonic()
            await case(target)
            print(f"{case.__name__}: {time.monotonic() - began:.1f} s")
    print(f"hostile clients: {time.monotonic() - started:.1f} s")


async def never_tls(target: Target) -> None:
    """Connections that never start TLS, on a fresh controller: each holds a slot under the
    cap (the oldest go), and costs little while it does."""
    # the test holds every one of them open: it needs that many files of its own
    count = min(NEVER_TLS, raise_open_file_limit(NEVER_TLS + 1_000) - 1_000)
    base = open_fds(target.pid)
    bound = base + DEFAULT_MAX_CONNECTIONS + FD_MARGIN
    sockets: list[socket.socket] = []

    async def attack() -> str:
        async def connect(i: int) -> None:
            with contextlib.suppress(OSError):  # refused while the backlog is full: retried
                sockets.append(await tcp_connection(target.port))

        before = rss(target.pid)
        try:
            with Peak(lambda: open_fds(target.pid)) as fds, Peak(lambda: rss(target.pid)) as mem:
                await gather_bounded(count, 200, connect)
        finally:
            for sock in sockets:
                sock.close()
        growth = mem.value - before
        assert fds.value <= bound, (fds.value, bound)
        assert growth <= NEVER_TLS_RSS_BOUND, (growth, NEVER_TLS_RSS_BOUND)
        return (f"{len(sockets):,} connected; controller FDs peak {fds.value} ≤ {bound}; RSS "
                f"{before / MB:.0f} MB → peak {mem.value / MB:.0f} MB: +{growth / MB:.1f} MB "
                f"≤ {NEVER_TLS_RSS_BOUND / MB:.0f}")  # fmt: skip

    scaled = "" if count == NEVER_TLS else f" (scaled from {NEVER_TLS:,}: open-file limit)"
    row = await under_rate(target, f"{count:,} connections that never start TLS{scaled}", attack,
                           f"FD bound: FDs at start ({base}) + cap {DEFAULT_MAX_CONNECTIONS} "
                           f"+ accept backlog {LISTEN_BACKLOG}")  # fmt: skip
    assert row.survived, row


class KeptConnection:
    """One TLS connection posting reviews one at a time, as the API server does: a reset or
    a close by the server fails the review (nothing reconnects behind the test's back)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, target: Target) -> KeptConnection:
        async with asyncio.timeout(BOUND):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", target.port, ssl=target.context, server_hostname="127.0.0.1"
            )
        return cls(reader, writer)

    async def review(self) -> None:
        body = review_body()
        self.writer.write(b"POST %s HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json"
                          b"\r\nContent-Length: %d\r\n\r\n%s"
                          % (WEBHOOK_PATH.encode(), len(body), body))  # fmt: skip
        async with asyncio.timeout(TIMEOUT_SECONDS):
            head = await self.reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 "), head
            [length] = [line.split(b":")[1] for line in head.lower().split(b"\r\n")
                        if line.startswith(b"content-length:")]  # fmt: skip
            review = json.loads(await self.reader.readexactly(int(length)))
        assert "allowed" in review["response"], review

    def close(self) -> None:
        self.writer.transport.abort()


async def newcomers(target: Target) -> None:
    """More newcomers than the cap, each sending one review and then idling, and one
    connection used every KEPT_EVERY of them (as the API server keeps its own): the cap
    makes room from the least recently used, never from the connection in use."""
    idle: list[KeptConnection] = []

    async def attack() -> str:
        closed_before = await closed_by_server(target)
        kept = await KeptConnection.open(target)
        kept_reviews, failed = 0, 0

        async def newcomer(i: int) -> None:
            nonlocal failed
            try:
                connection = await KeptConnection.open(target)
                idle.append(connection)
                await connection.review()
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError):
                failed += 1  # made room for a newer one before its review: counted

        try:
            for start in range(0, NEWCOMERS, KEPT_EVERY):
                await kept.review()  # a reset here fails the test
                kept_reviews += 1
                await gather_bounded(min(KEPT_EVERY, NEWCOMERS - start), 20, newcomer)
            await kept.review()
            kept_reviews += 1
        finally:
            kept.close()
            for connection in idle:
                connection.close()
        evicted = (await closed_by_server(target))["evicted"] - closed_before["evicted"]
        assert evicted >= NEWCOMERS + 1 - DEFAULT_MAX_CONNECTIONS, evicted  # the cap was met
        return (f"the kept-alive connection: {kept_reviews} reviews answered, never reset; "
                f"{evicted:.0f} evicted under the cap of {DEFAULT_MAX_CONNECTIONS}; "
                f"{failed} newcomers dropped before their review")  # fmt: skip

    row = await under_rate(
        target, f"{NEWCOMERS} newcomers each sending a review then idling", attack,
        f"one connection used every {KEPT_EVERY} newcomers, as the API server keeps its own",
    )  # fmt: skip
    assert row.survived, row


class Unread(asyncio.Protocol):
    """A TLS client that reads nothing: its transport's reading is paused at once, and what
    it takes before that is bounded (UNREAD_BUFFER_BYTES, in the kernel and in TLS)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).pause_reading()
        # asyncio's TLS transport holds 256 KiB of what it decrypts unless told otherwise
        transport.set_read_buffer_limits(high=UNREAD_BUFFER_BYTES)  # type: ignore[attr-defined]


async def pipelining(target: Target) -> None:
    """Clients pipelining PIPELINED_BYTES of small requests each and reading no answer: each
    is answered a bounded batch per turn of the loop, stops being read once its answers wait
    unread, and is aborted at its read deadline (10 s), while the reviews are answered."""
    one = b"GET " + WEBHOOK_PATH.encode() + b" HTTP/1.1\r\nHost: webhook\r\n\r\n"
    payload = one * (PIPELINED_BYTES // len(one))
    clients: list[asyncio.Transport] = []

    async def attack() -> str:
        loop = asyncio.get_running_loop()
        closed_before = await closed_by_server(target)

        async def connect(i: int) -> None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UNREAD_BUFFER_BYTES)
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", target.port))
            transport, _ = await loop.create_connection(
                Unread, sock=sock, ssl=target.context, server_hostname="127.0.0.1"
            )
            transport.write(payload)  # and no answer read
            clients.append(transport)

        before = rss(target.pid)
        began = time.monotonic()
        try:
            with Peak(lambda: rss(target.pid)) as peak:
                async with asyncio.timeout(BOUND):
                    await gather_bounded(PIPELINING, 25, connect)
                    # every one of them closed by the server: it stopped reading them, and
                    # their read deadline ran out (a client reading nothing may not notice)
                    await until_closed(target, "read-timeout",
                                       closed_before["read-timeout"] + PIPELINING)  # fmt: skip
        finally:
            for transport in clients:
                transport.abort()
        seconds = time.monotonic() - began
        growth = peak.value - before
        assert growth <= PIPELINING_RSS_BOUND, (growth, PIPELINING_RSS_BOUND)
        return (f"all {PIPELINING} closed by the server as slow readers within {seconds:.0f} s; "
                f"RSS {before / MB:.0f} MB → peak {peak.value / MB:.0f} MB: "
                f"+{growth / MB:.1f} MB ≤ {PIPELINING_RSS_BOUND / MB:.0f}")  # fmt: skip

    row = await under_rate(
        target, f"{PIPELINING} connections pipelining requests, reading no answer", attack,
        f"{PIPELINED_BYTES // 1024:,} KiB of requests each",
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
