"""Chunked transfer coding as socket_http decodes it, however the reads split the bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.socket_http import ConnectionLost, Dechunker


def chunked(pieces: list[bytes], trailers: bytes = b"") -> bytes:
    return (
        b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p) + b"0\r\n" + trailers + b"\r\n"
    )


def decode(wire: bytes, cuts: list[int]) -> tuple[bytes, Dechunker]:
    chunks, body, last = Dechunker(), b"", 0
    for cut in [*sorted(set(cuts)), len(wire)]:
        body += chunks.feed(wire[last:cut])
        last = cut
    return body, chunks


@given(
    st.lists(st.binary(max_size=300), max_size=8),
    st.lists(st.integers(min_value=0, max_value=3000), max_size=12),
    st.sampled_from([b"", b"X-Trailer: 1\r\n", b"A: b\r\nC: d\r\n"]),
    st.binary(max_size=20),
)
def test_any_split_of_the_wire_decodes_the_same(
    pieces: list[bytes], cuts: list[int], trailers: bytes, after: bytes
) -> None:
    wire = chunked(pieces, trailers)
    body, chunks = decode(wire + after, [c for c in cuts if c <= len(wire)])
    assert body == b"".join(pieces)
    assert chunks.done
    assert chunks.extra == after


@pytest.mark.parametrize(
    ("wire", "body", "done"),
    [
        (b"5\r\nhello\r\n0\r\n\r\n", b"hello", True),
        (b"5;name=value\r\nhello\r\n0\r\n\r\n", b"hello", True),  # a chunk extension
        (b"A\r\n0123456789\r\n", b"0123456789", False),  # upper-case hex, more to come
        (b"3\r\nab", b"ab", False),  # a chunk's data as far as it arrived
        (b"", b"", False),
    ],
)
def test_chunks_as_they_arrive(wire: bytes, body: bytes, done: bool) -> None:
    chunks = Dechunker()
    assert chunks.feed(wire) == body
    assert chunks.done is done


@pytest.mark.parametrize(
    "wire",
    [b"zz\r\nhello\r\n", b"5\r\nhelloXY", b"-5\r\nhello\r\n", b"1" * 5000],
    ids=["not hex", "no CRLF after the data", "negative", "a size line without end"],
)
def test_a_malformed_body_is_a_lost_connection(wire: bytes) -> None:
    with pytest.raises(ConnectionLost):
        Dechunker().feed(wire)
