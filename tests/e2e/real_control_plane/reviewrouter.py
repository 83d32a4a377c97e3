"""A router in front of the controller replicas that decides, per AdmissionReview, which
replica answers it: for the tests that must say "this eviction is answered by this replica,
that one by the other, at the same moment".

The session's `LoadBalancer` (a TCP relay, round-robin per connection) cannot: kube-apiserver
keeps its connections to a webhook alive and sends the next review on whichever idle one it
picks, so which replica answers which eviction is chance. The router terminates TLS with the
webhook's own serving certificate (the Secret the replicas serve from, `--self-signed`, so
the API server's caBundle verifies it as it verifies a replica), reads the review's pod, and
forwards the body as it came, over TLS, to the replica that pod is routed to (`route`), else
round-robin. It is registered as the load balancer's one backend while a test runs:

    router = await ReviewRouter(admin_client).start()   # once a replica wrote the Secret
    installation.service.add(router.port)                  # the URL the API server calls
    router.route(namespace, pod, replica.webhook_port)
    together = router.gather(namespace, [pod_a, pod_b])    # their first reviews, forwarded
    ...                                                     # together (`together.complete`)
    router.answers                                          # who answered what, in order

Replicas register themselves with `add`/`remove` (the `Backends` of loadbalancer.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from kubesim.client import KubeClient, resource_path

from .apiproxy import serving_context

SERVING_SECRET = ("graceful-drain", "graceful-drain-webhook-tls")  # deploy/base: --self-signed
# How long the first review of a gathered pod waits for the others': well inside the API
# server's timeoutSeconds (5), which also bounds the replica's own answer.
GATHER_BOUND = 1.5


@dataclass(frozen=True)
class Answered:
    """One review the router forwarded, and what the replica answered."""

    namespace: str
    pod: str
    port: int  # the replica's webhook port
    allowed: bool | None  # None: no answer (the replica did not answer, or not a review)
    code: int | None  # the answer's status.code (429 for a held eviction)
    dry_run: bool


@dataclass
class Gathering:
    """The first reviews of `pods` are held until all of them have arrived, then forwarded
    together; `complete` says they were (rather than released by GATHER_BOUND)."""

    waiting: set[tuple[str, str]]
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    complete: bool = False


@dataclass
class ReviewRouter:
    admin: KubeClient
    port: int = 0
    answers: list[Answered] = field(default_factory=list)
    _backends: list[int] = field(default_factory=list)
    _routes: dict[tuple[str, str], int] = field(default_factory=dict)
    _gatherings: dict[tuple[str, str], Gathering] = field(default_factory=dict)
    _turn: itertools.count[int] = field(default_factory=itertools.count)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    # --- backends (loadbalancer.Backends) and routes ----------------------------------------

    def add(self, port: int) -> None:
        self._backends.append(port)

    def remove(self, port: int) -> None:
        with contextlib.suppress(ValueError):
            self._backends.remove(port)

    def route(self, namespace: str, pod: str, port: int) -> None:
        """Reviews of `namespace`/`pod` go to the replica serving on `port` (while it is a
        backend; once removed, round-robin, as a Service would)."""
        self._routes[namespace, pod] = port

    def gather(self, namespace: str, pods: Iterable[str]) -> Gathering:
        keys = {(namespace, pod) for pod in pods}
        gathering = Gathering(set(keys))
        for key in keys:
            self._gatherings[key] = gathering
        return gathering

    def answers_for(self, namespace: str, pod: str) -> list[Answered]:
        """The answers to `namespace`/`pod`'s reviews, dry runs left out."""
        return [a for a in self.answers
                if (a.namespace, a.pod) == (namespace, pod) and not a.dry_run]  # fmt: skip

    def held(self, namespace: str, pod: str) -> bool:
        """A review of the pod's eviction was answered 429."""
        return any(a.code == 429 and a.allowed is False for a in self.answers_for(namespace, pod))

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Until `predicate()` holds, re-checked after every answer (the caller bounds it)."""
        while not predicate():
            changed = self._changed
            await changed.wait()

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> ReviewRouter:
        namespace, name = SERVING_SECRET
        secret = await self.admin.get(resource_path("v1", "secrets", namespace, name))
        data = {key: base64.b64decode(value) for key, value in secret["data"].items()}
        upstream = ssl.create_default_context(cadata=data["ca.crt"].decode())
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=upstream),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        )
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        serving = serving_context(data["tls.crt"], data["tls.key"])
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=serving)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        for gathering in self._gatherings.values():
            gathering.arrived.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    # --- forwarding -------------------------------------------------------------------------

    def _backend_for(self, key: tuple[str, str]) -> int | None:
        routed = self._routes.get(key)
        if routed is not None and routed in self._backends:
            return routed
        if not self._backends:
            return None
        return self._backends[next(self._turn) % len(self._backends)]

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        namespace, pod, dry_run = _subject(body)
        key = (namespace, pod)
        gathering = self._gatherings.pop(key, None)
        if gathering is not None:  # the first review of a gathered pod
            gathering.waiting.discard(key)
            if not gathering.waiting:
                gathering.complete = True
                gathering.arrived.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gathering.arrived.wait(), GATHER_BOUND)
        port = self._backend_for(key)
        allowed: bool | None = None
        code: int | None = None
        try:
            if port is None:
                return web.Response(status=502, text="no replica")
            assert self._session is not None
            try:
                async with self._session.post(
                    f"https://127.0.0.1:{port}{request.path_qs}", data=body,
                    headers={"Content-Type": request.content_type or "application/json"},
                ) as upstream:  # fmt: skip
                    payload = await upstream.read()
                    status = upstream.status
                    content_type = upstream.content_type
            except (aiohttp.ClientError, OSError) as error:
                return web.Response(status=502, text=f"replica on {port}: {error}")
            allowed, code = _answer(payload)
            return web.Response(status=status, body=payload, content_type=content_type)
        finally:
            self.answers.append(Answered(namespace, pod, port or 0, allowed, code, dry_run))
            self._changed.set()
            self._changed = asyncio.Event()


def _subject(body: bytes) -> tuple[str, str, bool]:
    """The review's (namespace, pod name, dry run); ("", "", False) for anything else."""
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        request = json.loads(body)["request"]
        return str(request["namespace"]), str(request["name"]), bool(request.get("dryRun"))
    return "", "", False


def _answer(payload: bytes) -> tuple[bool | None, int | None]:
    with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
        response = json.loads(payload)["response"]
        code = (response.get("status") or {}).get("code")
        return bool(response["allowed"]), None if code is None else int(code)
    return None, None
