"""kubesim.apiserver.protobuf.encode: what it writes reads back through protobuf.wire.

Fixed cases are the worked examples of the protocol-buffers encoding guide
(protobuf.dev/programming-guides/encoding): field 1 = 150 is `08 96 01`, and so on.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.protobuf.encode import (
    bytes_field,
    encode_tag,
    encode_varint,
    message_field,
    string_field,
    varint_field,
)
from kubesim.apiserver.protobuf.wire import (
    LENGTH_DELIMITED,
    MAX_FIELD_NUMBER,
    VARINT,
    as_int64,
    iter_fields,
    read_varint,
)

UINT64_MAX = (1 << 64) - 1


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (150, "9601"),
        (300, "ac02"),
        (UINT64_MAX, "ffffffffffffffffff01"),
        (-1, "ffffffffffffffffff01"),  # int64 -1: ten bytes of two's complement
        (-(1 << 63), "80808080808080808001"),
    ],
)
def test_varint_encoding(value: int, wire: str) -> None:
    assert encode_varint(value).hex() == wire


@pytest.mark.parametrize(
    ("encoded", "wire"),
    [
        (varint_field(1, 150), "089601"),
        (varint_field(4, True), "2001"),
        (string_field(2, "testing"), "120774657374696e67"),
        (message_field(3, varint_field(1, 150)), "1a03089601"),
        (bytes_field(15, b""), "7a00"),
        (string_field(16, "é"), "8201" + "02c3a9"),  # field 16 needs a two-byte tag
    ],
)
def test_field_encoding(encoded: bytes, wire: str) -> None:
    assert encoded.hex() == wire


@pytest.mark.parametrize("value", [UINT64_MAX + 1, -(1 << 63) - 1])
def test_varint_out_of_range_is_rejected(value: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode_varint(value)


@pytest.mark.parametrize("number", [0, -1, MAX_FIELD_NUMBER + 1])
def test_illegal_field_number_is_rejected(number: int) -> None:
    with pytest.raises(ValueError, match="illegal field number"):
        encode_tag(number, VARINT)


@given(st.integers(min_value=0, max_value=UINT64_MAX))
def test_unsigned_varint_round_trips(value: int) -> None:
    encoded = encode_varint(value)
    assert read_varint(encoded, 0) == (value, len(encoded))


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_int64_round_trips_as_twos_complement(value: int) -> None:
    decoded, _ = read_varint(encode_varint(value), 0)
    assert as_int64(decoded) == value


_numbers = st.integers(min_value=1, max_value=MAX_FIELD_NUMBER)
_field = st.one_of(
    st.tuples(_numbers, st.just(VARINT), st.integers(min_value=0, max_value=UINT64_MAX)),
    st.tuples(_numbers, st.just(LENGTH_DELIMITED), st.binary(max_size=300)),
)


@given(st.lists(_field, max_size=8))
def test_a_message_reads_back_field_by_field(fields: list[tuple[int, int, int | bytes]]) -> None:
    message = b"".join(
        varint_field(n, v) if isinstance(v, int) else bytes_field(n, v) for n, _, v in fields
    )
    assert list(iter_fields(message)) == fields


@given(st.text(max_size=50), st.lists(st.integers(min_value=0, max_value=1 << 40), max_size=4))
def test_a_nested_message_reads_back(text: str, numbers: list[int]) -> None:
    inner = string_field(1, text) + b"".join(varint_field(2, n) for n in numbers)
    [(number, wire_type, payload)] = iter_fields(message_field(7, inner))
    assert (number, wire_type) == (7, LENGTH_DELIMITED)
    assert isinstance(payload, bytes)
    read = list(iter_fields(payload))
    assert read[0] == (1, LENGTH_DELIMITED, text.encode())
    assert [v for _, _, v in read[1:]] == numbers
