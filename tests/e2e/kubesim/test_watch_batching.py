"""A watch connection writes the events queued for it in one write: one HTTP chunk for a burst
of writes made in one loop iteration, which real clients (kubectl, lightkube, the official
Python client) decode event by event, in order, non-ASCII text intact."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest
from lightkube import AsyncClient
from lightkube.resources.core_v1 import ConfigMap

from kubesim.sim import KubeSim
from tests.conftest import kubectl_watching

pytestmark = pytest.mark.e2e

BURST = 25
DEADLINE = 30.0


def text_of(name: str) -> str:
    return f"{name}: é 漢字 🙂"


def burst(sim: KubeSim, prefix: str) -> list[str]:
    """BURST ConfigMaps created back to back, with no await between them: one loop iteration."""
    names = [f"{prefix}-{index:02d}" for index in range(BURST)]
    for name in names:
        sim.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "default"},
                    "data": {"k": text_of(name)}})  # fmt: skip
    return names


def revision(sim: KubeSim) -> str:
    return str(sim.store.revision)


async def read_chunk(reader: asyncio.StreamReader) -> bytes:
    size = int((await reader.readline()).strip(), 16)
    data = await reader.readexactly(size)
    assert await reader.readexactly(2) == b"\r\n"
    return data


@asynccontextmanager
async def raw_watch(sim: KubeSim) -> AsyncIterator[asyncio.StreamReader]:
    """A watch of default's ConfigMaps over a bare TLS connection, past its response head
    (sent once the watch is registered): its body's chunks are kubesim's writes."""
    url = urlsplit(sim.url)
    context = ssl.create_default_context(cadata=sim.ca_pem.decode())
    reader, writer = await asyncio.open_connection(url.hostname, url.port, ssl=context)
    try:
        writer.write(
            f"GET /api/v1/namespaces/default/configmaps?watch=true&resourceVersion="
            f"{revision(sim)} HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Authorization: Bearer {sim.admin_token}\r\nAccept: application/json\r\n\r\n".encode()
        )
        async with asyncio.timeout(DEADLINE):
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        assert b"transfer-encoding: chunked" in head.lower()
        yield reader
    finally:
        writer.close()


def assert_the_burst(chunk: bytes, names: list[str]) -> None:
    lines = chunk.decode().splitlines()
    assert len(lines) == BURST  # every event of the burst in this one chunk
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == ["ADDED"] * BURST
    assert [e["object"]["metadata"]["name"] for e in events] == names
    assert [e["object"]["data"]["k"] for e in events] == [text_of(n) for n in names]


async def test_a_burst_goes_out_in_one_chunk_in_order(sim: KubeSim) -> None:
    async with raw_watch(sim) as reader:
        names = burst(sim, "one-chunk")
        async with asyncio.timeout(DEADLINE):
            chunk = await read_chunk(reader)
    assert_the_burst(chunk, names)


async def test_every_watch_of_a_collection_gets_the_burst(sim: KubeSim) -> None:
    """The lines reuse the store's encoding of each object (WatchEvent.line): each watch gets
    every event, whole and in order."""
    async with raw_watch(sim) as one, raw_watch(sim) as two, raw_watch(sim) as three:
        names = burst(sim, "fan-out")
        async with asyncio.timeout(DEADLINE):
            chunks = [await read_chunk(reader) for reader in (one, two, three)]
    for chunk in chunks:
        assert_the_burst(chunk, names)
    assert chunks[0] == chunks[1] == chunks[2]


async def test_lightkube_decodes_a_burst_in_order(sim: KubeSim, lk: AsyncClient) -> None:
    since = revision(sim)
    names = burst(sim, "lightkube")  # replayed to the watch from history, one batch
    seen: list[tuple[str, str | None, str]] = []
    async with asyncio.timeout(DEADLINE):
        async for event, obj in lk.watch(ConfigMap, namespace="default", resource_version=since):
            seen.append((event, obj.metadata.name, (obj.data or {}).get("k", "")))
            if len(seen) == BURST:
                break
    assert seen == [("ADDED", name, text_of(name)) for name in names]


async def test_the_official_client_decodes_a_burst_in_order(sim: KubeSim, core: Any) -> None:
    import kubernetes

    since = revision(sim)
    names = burst(sim, "official")

    def watch() -> list[tuple[str, str, str]]:
        seen: list[tuple[str, str, str]] = []
        watcher = kubernetes.watch.Watch()
        for event in watcher.stream(core.list_namespaced_config_map, "default",
                                    resource_version=since, timeout_seconds=20):  # fmt: skip
            obj: Any = event["object"]
            seen.append((event["type"], obj.metadata.name, (obj.data or {}).get("k", "")))
            if len(seen) == BURST:
                watcher.stop()
        return seen

    seen = await asyncio.wait_for(asyncio.to_thread(watch), DEADLINE)
    assert seen == [("ADDED", name, text_of(name)) for name in names]


async def test_kubectl_get_watch_prints_a_burst_in_order(sim: KubeSim) -> None:
    marker = {"name": "marker", "namespace": "default"}
    sim.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": marker, "data": {"k": "-"}})
    jsonpath = 'jsonpath={.metadata.name}={.data.k}{"\\n"}'
    async with kubectl_watching(sim.kubeconfig_path, "get", "configmaps", "-n", "default", "-w",
                                "-o", jsonpath, "--request-timeout=30s") as out:  # fmt: skip
        async with asyncio.timeout(DEADLINE):
            while (await out.readline()).decode().rstrip("\n") != "marker=-":
                pass  # kube-root-ca.crt and the like, listed before it
            names = burst(sim, "kubectl")  # after the list: kubectl's watch carries them
            printed = [(await out.readline()).decode().rstrip("\n") for _ in names]
    assert printed == [f"{name}={text_of(name)}" for name in names]
