"""Lists over 128 KiB go out gzip-compressed to a client that accepts gzip, as kube-apiserver
sends them (tests/e2e/differential compares the headers with it); kubectl, lightkube and the
graceful-drain cache read them as before."""

from __future__ import annotations

import asyncio
import gzip
import json
import ssl

import aiohttp
import pytest
from lightkube import AsyncClient
from lightkube.resources.core_v1 import ConfigMap

from kubesim.apiserver.server import GZIP_THRESHOLD_BYTES, accepts_gzip
from kubesim.sim import KubeSim
from tests.conftest import run_kubectl

pytestmark = pytest.mark.e2e

ITEMS = 60
FILLER = "é" * 1500  # 3,000 bytes of UTF-8 each: the list is well over the threshold
CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def big(sim: KubeSim) -> KubeSim:
    for index in range(ITEMS):
        sim.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": f"big-{index:02d}", "namespace": "default"},
                    "data": {"k": FILLER}})  # fmt: skip
    return sim


async def get(sim: KubeSim, accept_encoding: str, query: str = "") -> tuple[dict[str, str], bytes]:
    """Headers and the raw body as sent (not decompressed)."""
    connector = aiohttp.TCPConnector(ssl=ssl.create_default_context(cadata=sim.ca_pem.decode()))
    async with (
        aiohttp.ClientSession(connector=connector, auto_decompress=False) as session,
        session.get(
            sim.url + CMS + query,
            headers={
                "Authorization": f"Bearer {sim.admin_token}",
                "Accept-Encoding": accept_encoding,
            },
        ) as response,  # fmt: skip
    ):
        assert response.status == 200
        return dict(response.headers), await response.read()


async def test_a_large_list_is_gzipped_when_accepted(big: KubeSim) -> None:
    headers, body = await get(big, "gzip")
    assert headers.get("Content-Encoding") == "gzip"
    assert headers.get("Vary") == "Accept-Encoding"
    plain_headers, plain = await get(big, "identity")
    assert "Content-Encoding" not in plain_headers
    assert len(plain) > GZIP_THRESHOLD_BYTES > len(body)
    assert json.loads(gzip.decompress(body)) == json.loads(plain)


async def test_a_small_list_is_not(big: KubeSim) -> None:
    headers, body = await get(big, "gzip", "?limit=3")
    assert "Content-Encoding" not in headers
    assert len(json.loads(body)["items"]) == 3


@pytest.mark.parametrize(("header", "gzipped"), [
    ("gzip", True), ("deflate, gzip", True), (" gzip ,br", True), ("identity", False),
    ("", False), (None, False), ("gzip;q=1.0", False), ("x-gzip", False), ("GZIP", False),
])  # fmt: skip
def test_accept_encoding_names_gzip_as_a_bare_token(header: str | None, gzipped: bool) -> None:
    assert accepts_gzip(header) is gzipped


async def test_lightkube_reads_a_gzipped_list(big: KubeSim, lk: AsyncClient) -> None:
    names = [cm.metadata.name async for cm in lk.list(ConfigMap, namespace="default")
             if cm.metadata is not None and cm.data == {"k": FILLER}]  # fmt: skip
    assert names == [f"big-{index:02d}" for index in range(ITEMS)]


async def test_kubectl_reads_a_gzipped_list(big: KubeSim) -> None:
    result = await asyncio.to_thread(run_kubectl, big.kubeconfig_path, "get", "configmaps",
                                     "-n", "default", "-o", "json")  # fmt: skip
    items = json.loads(result.stdout)["items"]
    assert [i["metadata"]["name"] for i in items if i["data"] == {"k": FILLER}] == [
        f"big-{index:02d}" for index in range(ITEMS)
    ]
