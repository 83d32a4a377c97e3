"""Another commit's webhook server, for `python -m bench --only webhook --baseline REF`.

The webhook part then loads three servers in the same rounds: the reference, this checkout's
webhook and this one, the commit's `EvictionWebhook` behind the commit's `webhook_site`, TLS
source, JSON logging and metrics, deciding from a `ClusterCache` filled through the commit's
informers from the same objects (pickled by the parent into `objects` files, one per
resource, as list pages). Only its main route is served (no timed or canned path), and its
answers are checked by the load generator as the webhook's are.

It runs as `python -m bench.webhook.baseline_server FD`, a plain subprocess (not a spawned
multiprocessing child: that would import the parent's `__main__`, and with it this checkout's
product) whose PYTHONPATH puts the commit's exported folders first; it talks to the parent on
the socket FD with the `Child` protocol (bench/procs.py): `Ready`'s fields as a dict, then
"cpu" until "stop". This module imports no product code at its top: the commit's is imported
inside, from where the commit keeps it (the modules moved on 2026-12-03 and again on
2026-12-07; every layout is tried), and the run stops if the product came from anywhere but
the commit's folders.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
import pickle
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.procs import ChildError, receive_async, rss_bytes

PAGE = 500
BOOKMARK_SECONDS = 60.0  # kube-apiserver's watch cache sends one a minute
KINDS = ("Pod", "ReplicaSet", "Deployment", "Node")  # lightkube's class names
NO_API_SERVER = "https://127.0.0.1:9"
# name -> the modules (under graceful_drain.) that held it, newest layout first
PRODUCT: dict[str, tuple[str, ...]] = {
    "EvictionWebhook": ("controller.serving.webhook", "controller.webhook"),
    "WEBHOOK_PATH": ("controller.serving.webhook", "controller.webhook"),
    "Metrics": ("controller.serving.metrics", "controller.metrics"),
    "ClusterCache": ("controller.cache.cluster", "controller.decision.view", "controller.view"),
    "DecisionConfig": ("controller.decision.table", "controller.decide"),
    "ReloadingTLS": ("controller.tls.context", "controller.tls"),
    "webhook_site": ("controller.app",),
    "ListChunk": ("kube.informer",),
    "RawWatchEvent": ("kube.client",),
    "configure_logging": ("logs",),
}
OPTIONAL = {  # what older commits lack
    "Protect": ("controller.decision.table",),
    "Route": ("controller.serving.http",),
}


@dataclass(frozen=True)
class BaselineOptions:
    folders: tuple[str, ...]  # the commit's code, first on the path
    cert_pem: bytes
    key_pem: bytes
    objects: dict[str, str]  # lightkube kind -> file of pickled list pages
    rollout_timeout: timedelta
    enabled_annotation: str
    uvloop: bool = True


def write_pages(items: Iterable[dict[str, Any]], path: Path, page: int = PAGE) -> int:
    """`items` as pickled pages of `page` objects into `path`; how many were written."""
    count = 0
    with path.open("wb") as out:
        batch: list[dict[str, Any]] = []
        for item in items:
            batch.append(item)
            count += 1
            if len(batch) == page:
                pickle.dump(batch, out, protocol=pickle.HIGHEST_PROTOCOL)
                batch = []
        if batch:
            pickle.dump(batch, out, protocol=pickle.HIGHEST_PROTOCOL)
    return count


def read_pages(path: Path) -> Iterator[list[dict[str, Any]]]:
    with path.open("rb") as source:
        while True:
            try:
                yield pickle.load(source)
            except EOFError:
                return


def product_names(optional: bool = False) -> dict[str, Any]:
    """The commit's product objects by name; a missing optional one is left out."""
    found: dict[str, Any] = {}
    for table, required in ((PRODUCT, True), (OPTIONAL, False)):
        for name, modules in table.items():
            for module in modules:
                try:
                    value = getattr(importlib.import_module(f"graceful_drain.{module}"), name)
                except (ImportError, AttributeError):
                    continue
                found[name] = value
                break
            else:
                if required:
                    raise RuntimeError(f"the baseline's product has no {name} in {modules}")
    return found


def _check_origin(folders: tuple[str, ...]) -> None:
    import graceful_drain

    where = str(Path(graceful_drain.__file__).resolve())
    if not any(where.startswith(str(Path(folder).resolve())) for folder in folders):
        raise RuntimeError(f"the baseline server imported graceful_drain from {where}")


class PagedListWatch:
    """List pages read from a file; a watch that stays open, with a bookmark a minute and no
    changes, until cancelled."""

    def __init__(self, chunk: Any, event: Any, path: Path | None) -> None:
        self._chunk = chunk
        self._event = event
        self._path = path

    async def list(self) -> AsyncIterator[Any]:
        if self._path is not None:
            for page in read_pages(self._path):
                yield self._chunk("1", page)
        yield self._chunk("1", [])

    async def watch(self, resource_version: str, timeout_seconds: int) -> AsyncIterator[Any]:
        # as servers.MemoryListWatch: a bookmark a minute, else the informer re-lists
        while True:
            await asyncio.sleep(BOOKMARK_SECONDS)  # the API server's pace, not a synchronisation
            yield self._event("BOOKMARK", {"metadata": {"resourceVersion": resource_version}})


class _InstantPatcher:
    async def patch_json(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> None:
        return None


def instant_pod_reads(cache: Any) -> None:
    """The cache's live pod read (`read_pod`: pod-not-ready's, before it lets a pod go, since
    2026-12-07), for a pod the cache holds, answered in-process from the cache at once, as the
    PATCH is (`_InstantPatcher`): that GET's cost is the API server's and the client's. Left
    to NO_API_SERVER, it was a refused connection through lightkube and httpx per such review,
    milliseconds each. A pod the cache lacks still goes to the (failing) live read; a commit
    without `read_pod` is left as it is. Product-free: this checkout's webhook server
    (servers.py) and another commit's both use it."""
    read_pod = getattr(cache, "read_pod", None)
    if read_pod is None:
        return
    # the cached pod, found: through `lookup_pod` where the commit has it (before the
    # webhook's budget from arrival, 2026-12-07), else as decision/lookups.py's PodFound
    lookup_pod = getattr(cache, "lookup_pod", None)
    found: Any = (
        None
        if lookup_pod is not None
        else importlib.import_module("graceful_drain.controller.decision.lookups").PodFound
    )

    async def at_once(namespace: str, name: str, *, budget: float) -> Any:
        cached = cache.pods.get(namespace, name)
        if cached is None:
            return await read_pod(namespace, name, budget=budget)
        if lookup_pod is not None:
            return await lookup_pod(namespace, name, budget=budget)
        return found(cached)

    cache.read_pod = at_once


def _write_pair(directory: Path, options: BaselineOptions) -> tuple[Path, Path]:
    cert, key = directory / "tls.crt", directory / "tls.key"
    cert.write_bytes(options.cert_pem)
    key.write_bytes(options.key_pem)
    return cert, key


async def _serve(connection: Connection, options: BaselineOptions) -> None:
    from lightkube import AsyncClient
    from lightkube.config.kubeconfig import KubeConfig

    names = product_names()
    _check_origin(options.folders)
    with tempfile.TemporaryDirectory(prefix="bench-baseline-tls-") as tmp:
        cert, key = _write_pair(Path(tmp), options)
        gc.collect()
        rss_before = rss_bytes()
        started = time.perf_counter()
        config_options: dict[str, Any] = {
            "rollout_timeout": options.rollout_timeout,
            "enabled_annotation": options.enabled_annotation,
        }
        if "Protect" in names:  # the population's expected reasons are v2's
            config_options["protect"] = names["Protect"].SINGLE_REPLICA
        config = names["DecisionConfig"](**config_options)
        client = AsyncClient(KubeConfig.from_dict({
            "clusters": [{"name": "none", "cluster": {"server": NO_API_SERVER}}],
            "users": [{"name": "bench", "user": {"token": "unused"}}],
            "contexts": [{"name": "bench", "context": {"cluster": "none", "user": "bench"}}],
            "current-context": "bench",
        }))  # fmt: skip

        def list_watch(resource: Any, _scope: Any) -> PagedListWatch:
            path = options.objects.get(resource.__name__)
            return PagedListWatch(names["ListChunk"], names["RawWatchEvent"],
                                  None if path is None else Path(path))  # fmt: skip

        cache = names["ClusterCache"](
            client, enabled_annotation=options.enabled_annotation, list_watch=list_watch
        )
        await cache.start()
        await cache.wait_synced()
        instant_pod_reads(cache)
        objects = {resource.resource: len(resource) for resource in cache.resources}
        fill_seconds = time.perf_counter() - started
        webhook = names["EvictionWebhook"](
            cache, _InstantPatcher(), config=config, metrics=names["Metrics"]()
        )
        handler: Any = webhook.answer
        if "Route" in names and hasattr(webhook, "answer_at_once"):
            handler = names["Route"](webhook.answer, webhook.answer_at_once)
        tls = names["ReloadingTLS"](cert, key)
        await tls.start()
        site = names["webhook_site"]({names["WEBHOOK_PATH"]: handler}, "127.0.0.1", 0,
                                     tls.context)  # fmt: skip
        await site.start()
        gc.collect()
        connection.send({
            "port": site.port, "rss_before": rss_before, "rss_after": rss_bytes(),
            "fill_seconds": fill_seconds, "objects": objects,
        })  # fmt: skip
        while (command := await receive_async(connection)) != "stop":
            if command == "cpu":
                connection.send(time.process_time())
            else:
                connection.send(None)
        await site.stop()
        await tls.stop()
        await cache.stop()
        connection.send("stopped")


def main(argv: list[str]) -> int:
    connection = Connection(int(argv[1]))
    options: BaselineOptions = connection.recv()
    try:
        names = product_names()
        # As the controller logs: JSON at info, one line per admission (here to /dev/null).
        names["configure_logging"]("json", "info", stream=open(os.devnull, "w"))  # noqa: SIM115
        if options.uvloop:
            import uvloop

            uvloop.run(_serve(connection, options))
        else:
            asyncio.run(_serve(connection, options))
    except BaseException as error:
        connection.send(ChildError(f"{type(error).__name__}: {error}"))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
