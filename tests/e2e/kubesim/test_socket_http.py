"""The lean HTTP/1.1 client kubesim's own components use on its private Unix socket.

Against a real kubesim: queries with selectors and continue tokens reach the server as
aiohttp's client sent them, watches and big lists arrive whole. Against a scripted raw
server on a socket of the test's own: the framing and connection cases kubesim's server
rarely shows (lines split across chunks, several events in one chunk, an EOF-delimited body,
a keep-alive connection closed by the server, a request cancelled or timed out mid-flight,
a connection dropped mid-body).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from yarl import URL

from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.sim import KubeSim
from kubesim.socket_http import ConnectionLost, UnixHTTPClient, request_target

pytestmark = pytest.mark.e2e

CMS = resource_path("v1", "configmaps", "default")

TARGETS: list[tuple[str, dict[str, str] | None]] = [
    ("/api/v1/namespaces/default/configmaps/one", None),
    ("/api/v1/namespaces/default/configmaps", {}),
    ("/api/v1/nodes/node-a", {"resourceVersion": "42"}),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:node", None),
    ("/api/v1/pods", {"labelSelector": "app=web,tier!=db", "fieldSelector": "spec.nodeName=n"}),
    ("/api/v1/pods", {"labelSelector": "app in (a, b),!canary", "limit": "500"}),
    ("/api/v1/pods", {"continue": "eyJydiI6MTIsInN0YXJ0IjoiZGVmYXVsdC9hIn0+/=", "limit": "2"}),
    ("/api/v1/pods", {"watch": "true", "resourceVersion": "7", "timeoutSeconds": "300",
                      "allowWatchBookmarks": "true", "fieldSelector": "metadata.name=a.b"}),
    ("/api/v1/namespaces/default/pods/p%20q", None),
    ("/api/v1/namespaces?watch=true", {"timeoutSeconds": "0"}),
    ("/api/v1/pods", {"labelSelector": "x=ü&y", "q": "a+b c%d#e?f"}),
]  # fmt: skip


@pytest.mark.parametrize(("path", "params"), TARGETS)
def test_the_request_target_is_the_one_aiohttp_sent(
    path: str, params: dict[str, str] | None
) -> None:
    target = request_target(path, params)
    sent_by_aiohttp = URL("http://localhost" + path)
    if params:
        sent_by_aiohttp = sent_by_aiohttp.extend_query(params)
    assert target == sent_by_aiohttp.raw_path_qs
    received = URL("http://localhost" + target)  # as kubesim's aiohttp server parses it
    for key, value in (params or {}).items():
        assert received.query[key] == value


# against a real kubesim


async def test_selectors_and_continue_tokens_reach_kubesim_intact(sim: KubeSim) -> None:
    client = sim.local_client(sim.admin_token, "probe")
    try:
        for name, labels in [("a", {"app": "a"}), ("b", {"app": "b", "tier": "db"}),
                             ("c", {"app": "c"}), ("d", {"app": "b"})]:  # fmt: skip
            await client.create(CMS, {"metadata": {"name": name, "labels": labels}})
        chosen = await client.get(CMS, {"labelSelector": "app in (a,b),tier!=db"})
        assert sorted(i["metadata"]["name"] for i in chosen["items"]) == ["a", "d"]
        named = await client.get(CMS, {"fieldSelector": "metadata.name=c"})
        assert [i["metadata"]["name"] for i in named["items"]] == ["c"]
        seen, params = [], {"limit": "1", "labelSelector": "app"}
        while True:
            page = await client.get(CMS, params)
            seen += [i["metadata"]["name"] for i in page["items"]]
            token = page["metadata"].get("continue")
            if not token:
                break
            params = {"limit": "1", "labelSelector": "app", "continue": token}
        assert sorted(seen) == ["a", "b", "c", "d"]
    finally:
        await client.close()


async def test_a_list_bigger_than_the_gzip_threshold_arrives_whole(sim: KubeSim) -> None:
    client = sim.local_client(sim.admin_token, "probe")
    try:
        for n in range(20):
            body = {"metadata": {"name": f"big-{n}"}, "data": {"x": str(n) * 10_000}}
            await client.create(CMS, body)
        listed = await client.get(CMS)
        big = {i["metadata"]["name"]: i["data"]["x"] for i in listed["items"]
               if i["metadata"]["name"].startswith("big-")}  # fmt: skip
        assert big == {f"big-{n}": str(n) * 10_000 for n in range(20)}
    finally:
        await client.close()


async def test_a_watch_with_a_field_selector_and_errors_as_status(sim: KubeSim) -> None:
    client = sim.local_client(sim.admin_token, "probe")
    try:
        version = (await client.get(CMS))["metadata"]["resourceVersion"]
        await client.create(CMS, {"metadata": {"name": "other"}})
        await client.create(CMS, {"metadata": {"name": "wanted"}})
        params = {"fieldSelector": "metadata.name=wanted"}
        async for event in client.watch(CMS, version, timeout_seconds=30, params=params):
            if event["type"] != "BOOKMARK":
                assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "wanted")
                break
        with pytest.raises(ApiStatusError) as missing:
            await client.get(CMS + "/nope")
        assert missing.value.code == 404
        assert missing.value.reason == "NotFound"
        nobody = sim.local_client(sim.service_account_token("default", "nobody"), "probe")
        try:
            with pytest.raises(ApiStatusError) as forbidden:
                async for _ in nobody.watch(CMS, version, timeout_seconds=30):
                    pass
        finally:
            await nobody.close()
        assert forbidden.value.code == 403
        assert forbidden.value.reason == "Forbidden"
    finally:
        await client.close()


async def test_after_kubesim_stops_a_request_fails_as_a_connection_error() -> None:
    sim = KubeSim()
    await sim.start()
    client = sim.local_client(sim.admin_token, "probe")
    await client.get(CMS)
    await sim.stop()
    try:
        with pytest.raises(ConnectionLost) as lost:
            await client.get(CMS)
        assert isinstance(lost.value, aiohttp.ClientConnectionError)
        assert isinstance(lost.value, OSError)
    finally:
        await client.close()


# against a scripted server

Handler = Callable[["Conn"], Awaitable[None]]


class Conn:
    """One accepted connection of the scripted server, as the script sees it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def request(self) -> tuple[str, bytes] | None:
        """The next request's line and body; None at EOF (the client closed it)."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode().split("\r\n")
        length = 0
        for line in lines[1:]:
            if line.lower().startswith("content-length:"):
                length = int(line.split(":")[1])
        return lines[0], await self.reader.readexactly(length)

    def answer(self, body: bytes, extra: str = "") -> None:
        self.writer.write(
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n".encode()
            + body
        )

    def chunked_head(self) -> None:
        self.writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")

    def chunk(self, data: bytes) -> None:
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))


class Scripted:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.accepted = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            await self.handler(Conn(reader, writer))
        finally:
            writer.close()


@pytest.fixture
async def socket_dir() -> AsyncIterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="shttp-", dir="/tmp"))  # short: a socket path
    yield folder
    shutil.rmtree(folder)


async def serving(socket_dir: Path, handler: Handler) -> tuple[Scripted, asyncio.Server, str]:
    scripted = Scripted(handler)
    path = str(socket_dir / "s.sock")
    server = await asyncio.start_unix_server(scripted.serve, path)
    return scripted, server, path


def client_on(path: str) -> KubeClient:
    return KubeClient("http://localhost", "token", None, "probe", unix_socket=path)


async def keep_answering(conn: Conn) -> None:
    while (request := await conn.request()) is not None:
        conn.answer(b'{"line": "%s"}' % request[0].encode())


async def test_requests_share_one_keep_alive_connection(socket_dir: Path) -> None:
    scripted, server, path = await serving(socket_dir, keep_answering)
    client = client_on(path)
    try:
        for n in range(5):
            answer = await client.get(CMS, {"labelSelector": f"n={n}"})
            assert answer == {"line": f"GET {CMS}?labelSelector=n%3D{n} HTTP/1.1"}
        assert scripted.accepted == 1
    finally:
        await client.close()
        server.close()


async def test_watch_lines_split_across_chunks_and_several_in_one(socket_dir: Path) -> None:
    async def watch(conn: Conn) -> None:
        assert await conn.request() is not None
        conn.chunked_head()
        conn.chunk(b'{"type": "ADDED", "object": {"n": 1}}\n{"type": "MODI')
        conn.chunk(b'FIED", "object": {"n": 2}}\n')
        conn.chunk(b'{"type": "DELETED", "object": {"n": 3}}\n\n{"type": "ADDED", "obj')
        conn.chunk(b'ect": {"n": 4}}')  # the last line ends with the stream, no newline
        conn.writer.write(b"0\r\n\r\n")
        await keep_answering(conn)

    scripted, server, path = await serving(socket_dir, watch)
    client = client_on(path)
    try:
        events = [(e["type"], e["object"]["n"]) async for e in client.watch(CMS, "1")]
        assert events == [("ADDED", 1), ("MODIFIED", 2), ("DELETED", 3), ("ADDED", 4)]
        await client.get(CMS)  # the finished watch's connection went back to the pool
        assert scripted.accepted == 1
    finally:
        await client.close()
        server.close()


async def test_an_idle_connection_the_server_closed_is_replaced(socket_dir: Path) -> None:
    """The server answers once, then closes the connection when the next request comes:
    an idempotent request is sent again on a new connection; a PATCH fails as aiohttp's
    did, with an error the callers' retry loops catch."""

    async def answer_once(conn: Conn) -> None:
        request = await conn.request()
        assert request is not None
        conn.answer(b"{}")
        await conn.request()  # then close, unanswered

    scripted, server, path = await serving(socket_dir, answer_once)
    client = client_on(path)
    try:
        await client.get(CMS)
        assert await client.get(CMS) == {}
        assert scripted.accepted == 2  # the first, closed unanswered; the one that answered
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.patch(CMS, {"data": {}})
        assert scripted.accepted == 2
        assert await client.patch(CMS, {"data": {}}) == {}
        assert scripted.accepted == 3
    finally:
        await client.close()
        server.close()


async def test_connection_close_and_an_eof_delimited_body(socket_dir: Path) -> None:
    async def close_after(conn: Conn) -> None:
        assert await conn.request() is not None
        conn.writer.write(b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"eof": ')
        conn.writer.write(b"true}")

    scripted, server, path = await serving(socket_dir, close_after)
    client = client_on(path)
    try:
        assert await client.get(CMS) == {"eof": True}
        assert await client.get(CMS) == {"eof": True}
        assert scripted.accepted == 2
    finally:
        await client.close()
        server.close()


async def test_a_request_cancelled_mid_flight_does_not_spoil_the_next(socket_dir: Path) -> None:
    received = asyncio.Event()
    client_gone = asyncio.Event()

    async def hold_first(conn: Conn) -> None:
        first = await conn.request()
        assert first is not None
        if "held" in first[0]:
            received.set()
            assert await conn.request() is None  # the client closed this connection
            client_gone.set()
            return
        conn.answer(b'{"ok": true}')
        await keep_answering(conn)

    scripted, server, path = await serving(socket_dir, hold_first)
    client = client_on(path)
    try:
        held = asyncio.create_task(client.get(CMS + "/held"))
        await asyncio.wait_for(received.wait(), 10)
        held.cancel()
        with pytest.raises(asyncio.CancelledError):
            await held
        await asyncio.wait_for(client_gone.wait(), 10)
        assert await client.get(CMS) == {"ok": True}
        assert scripted.accepted == 2
    finally:
        await client.close()
        server.close()


async def test_a_timeout_closes_the_connection_and_raises_timeout_error(
    socket_dir: Path,
) -> None:
    async def never_answer_first(conn: Conn) -> None:
        first = await conn.request()
        if first is not None and "slow" in first[0]:
            await conn.request()
            return
        conn.answer(b"{}")
        await keep_answering(conn)

    scripted, server, path = await serving(socket_dir, never_answer_first)
    client = client_on(path)
    try:
        with pytest.raises(TimeoutError):
            await client.request("GET", CMS + "/slow", request_timeout=0.2)
        assert await client.get(CMS) == {}
        assert scripted.accepted == 2
    finally:
        await client.close()
        server.close()


async def test_a_watch_idle_past_its_read_timeout_fails(socket_dir: Path) -> None:
    async def go_quiet(conn: Conn) -> None:
        assert await conn.request() is not None
        conn.chunked_head()
        conn.chunk(b'{"type": "ADDED", "object": {}}\n')
        await conn.request()  # nothing more, until the client closes the connection

    _, server, path = await serving(socket_dir, go_quiet)
    pool = UnixHTTPClient(path, "localhost", {})
    try:
        stream = await pool.stream("/watch", idle_timeout=0.2)
        lines = stream.lines()
        assert await anext(lines) == b'{"type": "ADDED", "object": {}}'
        with pytest.raises(TimeoutError):
            await anext(lines)
        await lines.aclose()
        stream.close()
    finally:
        await pool.close()
        server.close()


async def test_a_connection_dropped_mid_body_is_a_connection_error(socket_dir: Path) -> None:
    async def drop(conn: Conn) -> None:
        request = await conn.request()
        assert request is not None
        if "chunked" in request[0]:
            conn.chunked_head()
            conn.chunk(b'{"type": "ADDED"')
        else:
            conn.writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}")

    _, server, path = await serving(socket_dir, drop)
    client = client_on(path)
    try:
        with pytest.raises(ConnectionLost) as lost:
            await client.get(CMS)
        assert isinstance(lost.value, aiohttp.ClientError)
        assert isinstance(lost.value, OSError)
        with pytest.raises(ConnectionLost):
            async for _ in client.watch(CMS + "/chunked", "1"):
                pass
    finally:
        await client.close()
        server.close()


async def test_close_ends_pooled_connections_and_an_open_watch(socket_dir: Path) -> None:
    closed = 0
    watching, both_closed = asyncio.Event(), asyncio.Event()

    async def count_closes(conn: Conn) -> None:
        nonlocal closed
        request = await conn.request()
        assert request is not None
        if "watch" in request[0]:
            conn.chunked_head()
            conn.chunk(b'{"type": "ADDED", "object": {}}\n')
        else:
            conn.answer(b"{}")
        while await conn.request() is not None:
            conn.answer(b"{}")
        closed += 1
        if closed == 2:
            both_closed.set()

    _, server, path = await serving(socket_dir, count_closes)
    client = client_on(path)

    async def watch() -> None:
        async for _ in client.watch(CMS + "/watch", "1"):
            watching.set()

    task = asyncio.create_task(watch())
    try:
        await asyncio.wait_for(watching.wait(), 10)
        await client.get(CMS)
        await client.close()
        with pytest.raises(ConnectionLost):
            await asyncio.wait_for(task, 10)
        await asyncio.wait_for(both_closed.wait(), 10)  # the server saw both connections end
    finally:
        task.cancel()
        await client.close()
        server.close()
