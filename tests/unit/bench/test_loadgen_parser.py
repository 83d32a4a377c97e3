"""The load generator's response parser: any split of the bytes, keep-alive, failures."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from bench.webhook.loadgen import HttpConnection, request_bytes
from hypothesis import given
from hypothesis import strategies as st

BODY = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u"}}'
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\nDate: Sat, 01 Jun 2024 12:00:00 GMT\r\n"
    b"Server: Python/3.11 aiohttp/3.14\r\n\r\n" + BODY
)


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def abort(self) -> None:
        self.aborted = True


def connected() -> tuple[HttpConnection, FakeTransport]:
    connection = HttpConnection()
    transport = FakeTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, transport


async def exchange(connection: HttpConnection, chunks: list[bytes]) -> tuple[int, bytes]:
    pending = connection.start(b"request")
    for chunk in chunks:
        connection.data_received(chunk)
    return await pending


@given(st.lists(st.integers(min_value=0, max_value=len(RESPONSE)), max_size=6))
def test_a_response_split_anywhere_is_read_whole(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(RESPONSE)]
    chunks = [RESPONSE[a:b] for a, b in itertools.pairwise(points)]

    async def scenario() -> tuple[int, bytes]:
        connection, _ = connected()
        return await exchange(connection, chunks)

    assert asyncio.run(scenario()) == (200, BODY)


async def test_keep_alive_reads_back_to_back_responses_in_order() -> None:
    connection, transport = connected()
    second = RESPONSE.replace(b"200 OK", b"429 Too Many Requests")
    assert await exchange(connection, [RESPONSE + second[:10]]) == (200, BODY)
    pending = connection.start(b"again")
    connection.data_received(second[10:])
    assert await pending == (429, BODY)
    assert transport.written == [b"request", b"again"]


async def test_a_response_without_content_length_fails_the_connection() -> None:
    connection, transport = connected()
    with pytest.raises(Exception, match="content-length"):
        await exchange(connection, [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"])
    assert transport.aborted


async def test_a_lost_connection_fails_the_request_in_flight() -> None:
    connection, _ = connected()
    pending = connection.start(b"request")
    connection.connection_lost(None)
    with pytest.raises(Exception, match="connection lost"):
        await pending
    with pytest.raises(Exception, match="closed"):
        await connection.send(b"more")


def test_request_bytes_carry_the_length_of_the_body() -> None:
    raw = request_bytes("127.0.0.1", 8443, "/validate-eviction", b"{}")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /validate-eviction HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n")
    assert b"\r\nContent-Length: 2" in head
    assert body == b"{}"
