"""A fault-injecting HTTPS proxy between one API client (a controller process) and the real
kube-apiserver, for the faults the real server cannot be made to produce on cue (a failed
read at one precise moment) and for holding one request back while the test changes the
world under it.

    proxy = await ApiProxy(cluster.server, cluster.ca_pem).start()
    proxy.rules.append(rule)        # async (Seen) -> int | None: a status to answer instead
    ... the client's kubeconfig points at proxy.url, trusting proxy.ca_pem ...
    await proxy.stop()

Every request is relayed as it came (its token included: the API server still
authenticates and authorizes the client, and audits what it was answered: `answered` keeps
the status of each relayed request, as the client received it); a rule may
delay it (await inside the rule) or answer it with a Kubernetes Status of its own, which
then never reaches the API server. Responses, watches included, are streamed back chunk
by chunk as they arrive; `relayed` keeps the body chunks of watch responses so a test can
wait until the client has been sent an event.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

import aiohttp
from aiohttp import web

from realcluster.pki import ClusterCA

# Hop-by-hop headers, and the ones aiohttp sets itself for the relayed body.
_NOT_RELAYED = {"host", "connection", "keep-alive", "transfer-encoding", "content-length",
                "upgrade", "proxy-connection", "te", "trailer"}  # fmt: skip


@dataclass(frozen=True)
class Seen:
    """One request as the client sent it."""

    method: str
    path: str
    query: dict[str, str]
    body: bytes

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")

    def is_(self, method: str, path_suffix: str) -> bool:
        return self.method == method and self.path.endswith(path_suffix) and not self.watch


Rule = Callable[[Seen], Awaitable[int | None]]


def no_lag(seen: Seen) -> float:
    return 0.0


def status_body(code: int, message: str) -> dict[str, object]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "InternalError" if code >= 500 else "Conflict",
            "code": code}  # fmt: skip


@dataclass
class ApiProxy:
    upstream: str
    upstream_ca_pem: bytes
    rules: list[Rule] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    relayed: list[tuple[str, bytes]] = field(default_factory=list)  # (path, watch chunk)
    answered: list[tuple[Seen, int]] = field(default_factory=list)  # the API server's status
    # Seconds each chunk of a watch is held back before it is relayed (an informer lagging
    # behind the API server, as under load), per watch request.
    lag: Callable[[Seen], float] = no_lag
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""
    ca_pem: bytes = b""
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    async def start(self) -> ApiProxy:
        authority = ClusterCA("api-proxy-ca")
        pair = authority.issue_serving(["127.0.0.1"])
        self.ca_pem = authority.cert_pem
        serving = serving_context(pair.cert_pem, pair.key_pem)
        upstream = ssl.create_default_context(cadata=self.upstream_ca_pem.decode())
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=upstream),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._relay)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=serving)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"https://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _note(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Until `predicate()` holds, re-checked whenever a request or a chunk passes (the
        caller bounds the wait)."""
        while not predicate():
            await self.changed.wait()

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        seen = Seen(request.method, request.path, dict(request.query), body)
        self.seen.append(seen)
        self._note()
        for rule in list(self.rules):
            code = await rule(seen)
            if code is not None:
                return web.json_response(
                    status_body(code, f"injected by the test's API proxy: {code}"), status=code
                )
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_RELAYED}
        async with self._session.request(
            request.method, self.upstream + request.path_qs, headers=headers,
            data=body if body else None,
        ) as upstream:  # fmt: skip
            relayed = {k: v for k, v in upstream.headers.items() if k.lower() not in _NOT_RELAYED}
            self.answered.append((seen, upstream.status))
            self._note()
            response = web.StreamResponse(status=upstream.status, headers=relayed)
            await response.prepare(request)
            lag = self.lag(seen) if seen.watch else 0.0
            async for chunk in _lagged(upstream.content.iter_any(), lag):
                if seen.watch:
                    self.relayed.append((seen.path, chunk))
                    self._note()
                await response.write(chunk)
            await response.write_eof()
            return response


async def _lagged(chunks: AsyncIterator[bytes], lag: float) -> AsyncIterator[bytes]:
    """`chunks`, each `lag` seconds after it arrived (as they come when `lag` is 0)."""
    if lag <= 0:
        async for chunk in chunks:
            yield chunk
        return
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()

    async def read() -> None:
        try:
            async for chunk in chunks:
                queue.put_nowait((loop.time() + lag, chunk))
        finally:
            queue.put_nowait((loop.time() + lag, None))

    reader = asyncio.create_task(read())
    try:
        while True:
            due, held = await queue.get()
            await asyncio.sleep(max(0.0, due - loop.time()))  # the lag injected, by design
            if held is None:
                return
            yield held
    finally:
        reader.cancel()


def serving_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A TLS server context serving `cert_pem` with `key_pem`."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with TemporaryDirectory() as directory:  # load_cert_chain reads files only
        cert, key = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        context.load_cert_chain(cert, key)
    return context
