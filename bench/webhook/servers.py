"""The two HTTPS servers the webhook benchmark loads, each in its own process.

- `webhook`: the controller's `EvictionWebhook` behind the same HTTP server and connection
  guard (`app.webhook_site`), TLS source and JSON logging (at info, one line per admission,
  written to /dev/null) as the controller process, deciding against a `ClusterCache` filled
  through its informers' list path (transform + store + indexes) from objects generated in
  memory instead of an API server. ROLLOUT_REQUESTED's restarted-at PATCH goes to a patcher
  that returns at once. It also answers on breakdown.TIMED_PATH (the handler, timed stage by
  stage) and breakdown.CANNED_PATH (the reference's answer: the stack in this process).
- `reference`: a trivial aiohttp handler on the same TLS settings that reads the body and
  returns a canned AdmissionResponse: the cost of aiohttp's stack itself.

Protocol with the parent: the child sends `Ready` once serving, then answers "cpu" with its
process CPU seconds, "stages-reset" and "stages" (the webhook's µs per request by stage on
breakdown.TIMED_PATH since the reset) until it is told "stop".
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from aiohttp import web
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.resource import Resource
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Node, Pod

from bench.procs import receive_async, rss_bytes, run_child
from bench.webhook import breakdown, population
from bench.webhook.baseline_server import instant_pod_reads
from bench.webhook.population import PopulationSpec, PreparedRequest
from graceful_drain.controller.app import HttpSite, webhook_site
from graceful_drain.controller.cache.cluster import ClusterCache
from graceful_drain.controller.decision.table import DecisionConfig, Protect
from graceful_drain.controller.serving.http import Arrival, WebhookServer
from graceful_drain.controller.serving.metrics import Metrics
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH, EvictionWebhook
from graceful_drain.controller.tls.context import ReloadingTLS, server_context
from graceful_drain.kube.client import RawWatchEvent
from graceful_drain.kube.informer import ListChunk, ListWatch
from graceful_drain.logs import configure_logging

LIST_PAGE = 500
BOOKMARK_SECONDS = 60.0  # kube-apiserver's watch cache sends one a minute
# Nothing listens here: a pod missing from the cache fails its live GET at once (CACHE_COLD), which
# the load generator then counts as a wrong answer.
NO_API_SERVER = "https://127.0.0.1:9"

CANNED_RESPONSE = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True},
    },
    separators=(",", ":"),
).encode()


@dataclass(frozen=True)
class ServerOptions:
    kind: str  # "webhook" or "reference"
    cert_pem: bytes
    key_pem: bytes
    spec: PopulationSpec
    requests: tuple[PreparedRequest, ...]  # verified against the cache before serving
    uvloop: bool = True


@dataclass(frozen=True)
class Ready:
    port: int
    rss_before: int  # bytes, before the cache was filled
    rss_after: int  # bytes, once serving
    fill_seconds: float  # list + transform + index of every object
    objects: dict[str, int]  # cached objects per resource
    mismatches: list[str]  # requests whose decision reason differs from the expected one


class MemoryListWatch:
    """A ListWatch whose list pages come from an iterable of raw objects, and whose watch
    stays open, with a bookmark a minute and no changes, until cancelled."""

    def __init__(self, items: Iterable[dict[str, Any]], page: int = LIST_PAGE) -> None:
        self._items = items
        self._page = page

    async def list(self) -> AsyncIterator[ListChunk]:
        page: list[dict[str, Any]] = []
        for item in self._items:
            page.append(item)
            if len(page) == self._page:
                yield ListChunk("1", page)
                page = []
        yield ListChunk("1", page)

    async def watch(
        self, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[RawWatchEvent]:
        # No changes, but a bookmark a minute as the API server sends: an informer that hears
        # nothing for its silence limit re-lists, and this list's items are read only once.
        while True:
            await asyncio.sleep(BOOKMARK_SECONDS)  # the API server's pace, not a synchronisation
            yield RawWatchEvent("BOOKMARK", {"metadata": {"resourceVersion": resource_version}})


def memory_sources(spec: PopulationSpec, now: datetime) -> dict[type[Resource], ListWatch]:
    layout = population.plan(spec)
    return {
        Pod: MemoryListWatch(population.raw_pods(layout, spec)),
        ReplicaSet: MemoryListWatch(population.raw_replicasets(layout)),
        Deployment: MemoryListWatch(population.raw_deployments(layout, now)),
        Node: MemoryListWatch(raw_nodes(population.raw_pods(layout, spec))),
    }


def raw_nodes(pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Node, not being drained, for every node the pods run on."""
    names = sorted({str((pod.get("spec") or {}).get("nodeName") or "") for pod in pods} - {""})
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}} for name in names]


async def filled_cache(spec: PopulationSpec, config: DecisionConfig) -> ClusterCache:
    sources = memory_sources(spec, datetime.now(UTC))
    client = AsyncClient(_unreachable_config())
    cache = ClusterCache(
        client,
        enabled_annotation=config.enabled_annotation,
        list_watch=lambda resource, _scope: sources[resource],
    )
    await cache.start()
    await cache.wait_synced()
    instant_pod_reads(cache)  # pod-not-ready's live read, answered in-process
    return cache


def _unreachable_config() -> KubeConfig:
    return KubeConfig.from_dict(
        {
            "clusters": [{"name": "none", "cluster": {"server": NO_API_SERVER}}],
            "users": [{"name": "bench", "user": {"token": "unused"}}],
            "contexts": [{"name": "bench", "context": {"cluster": "none", "user": "bench"}}],
            "current-context": "bench",
        }
    )


class InstantPatcher:
    """ROLLOUT_REQUESTED's PATCH, answered at once: the API server's cost is not the webhook's."""

    async def patch_json(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> None:
        return None


def decision_config() -> DecisionConfig:
    # The population's expected reasons are the single-replica table's (surge-ready from the
    # status and the pod cache, replicas-not-one); the last-ready rule reads the same caches
    # plus one Node lookup per other Ready pod.
    return DecisionConfig(
        rollout_timeout=population.ROLLOUT_TIMEOUT,
        enabled_annotation=population.ENABLED_ANNOTATION,
        protect=Protect.SINGLE_REPLICA,
    )


async def verify_reasons(
    webhook: EvictionWebhook, requests: Iterable[PreparedRequest]
) -> list[str]:
    """Each request's decision reason, as the webhook decides it, against the expected one."""
    mismatches = []
    for prepared in requests:
        _, outcome = await webhook.review(prepared.body)
        reason = outcome.decision.reason
        if reason is not prepared.case.reason:
            mismatches.append(
                f"{prepared.case.namespace}/{prepared.case.pod} ({prepared.case.shape}): "
                f"{reason}, expected {prepared.case.reason}"
            )
    return mismatches


def _write_pair(directory: Path, options: ServerOptions) -> tuple[Path, Path]:
    cert, key = directory / "tls.crt", directory / "tls.key"
    cert.write_bytes(options.cert_pem)
    key.write_bytes(options.key_pem)
    return cert, key


async def _serve(connection: Connection, options: ServerOptions) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        cert, key = _write_pair(Path(tmp), options)
        gc.collect()
        rss_before = rss_bytes()
        cache: ClusterCache | None = None
        mismatches: list[str] = []
        clock: breakdown.StageClock | None = None
        objects: dict[str, int] = {}
        tls: ReloadingTLS | None = None
        site: WebhookServer | HttpSite
        started = time.perf_counter()
        if options.kind == "webhook":
            config = decision_config()
            cache = await filled_cache(options.spec, config)
            objects = {resource.resource: len(resource) for resource in cache.resources}
            fill_seconds = time.perf_counter() - started
            webhook = EvictionWebhook(cache, InstantPatcher(), config=config, metrics=Metrics())
            mismatches = await verify_reasons(webhook, options.requests)
            clock = breakdown.StageClock()
            timed = breakdown.TimedWebhook(
                cache, InstantPatcher(), config=config, metrics=Metrics(), stages=clock
            )
            routes = {
                WEBHOOK_PATH: webhook.answer,
                breakdown.TIMED_PATH: breakdown.timed_handler(timed),
                breakdown.CANNED_PATH: canned_answer,
            }
            tls = ReloadingTLS(cert, key)
            await tls.start()
            site = webhook_site(routes, "127.0.0.1", 0, tls.context)  # as the controller serves it
        else:
            fill_seconds = 0.0
            context = server_context()
            context.load_cert_chain(cert, key)
            site = HttpSite("reference", reference_app(), "127.0.0.1", 0, context)
        await site.start()
        gc.collect()
        connection.send(
            Ready(site.port, rss_before, rss_bytes(), fill_seconds, objects, mismatches)
        )
        while (command := await receive_async(connection)) != "stop":
            if command == "cpu":
                connection.send(time.process_time())
            elif command == "stages-reset":
                if clock is not None:
                    clock.reset()
                connection.send(None)
            elif command == "stages":
                connection.send({} if clock is None else clock.micros())
        await site.stop()
        if tls is not None:
            await tls.stop()
        if cache is not None:
            await cache.stop()
        connection.send("stopped")


async def canned_answer(body: bytes | None, arrival: Arrival) -> bytes:
    """The reference's answer, from the webhook's own server (the stack in its process)."""
    return CANNED_RESPONSE


async def canned(request: web.BaseRequest) -> web.Response:
    """The reference's handler: read the body, answer a canned AdmissionResponse."""
    await request.read()
    return web.Response(body=CANNED_RESPONSE, content_type="application/json")


def reference_app() -> web.Application:
    app = web.Application()
    app.router.add_post(WEBHOOK_PATH, canned)
    return app


def server_main(connection: Connection, options: ServerOptions) -> None:
    """Process entry point (spawned)."""
    # As the controller logs: JSON at info, one line per admission (here to /dev/null).
    configure_logging("json", "info", stream=open(os.devnull, "w"))  # noqa: SIM115
    run_child(connection, _serve(connection, options), uvloop=options.uvloop)
