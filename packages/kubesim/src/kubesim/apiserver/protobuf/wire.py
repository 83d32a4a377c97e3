"""Protocol-buffers wire format: split a message into its (field number, wire type, value) items.

Schema-free and pure. Error texts follow gogo/protobuf's generated unmarshallers
(k8s.io/api/*/generated.pb.go), which is what the real API server reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

VARINT: Final = 0
FIXED64: Final = 1
LENGTH_DELIMITED: Final = 2
START_GROUP: Final = 3
END_GROUP: Final = 4
FIXED32: Final = 5

MAX_FIELD_NUMBER: Final = (1 << 29) - 1
_MAX_VARINT_BYTES: Final = 10


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at `pos` and the position after it."""
    result = 0
    for shift in range(0, 7 * _MAX_VARINT_BYTES, 7):
        if pos >= len(data):
            raise WireError("unexpected EOF")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >= 1 << 64:
                raise WireError("proto: integer overflow")
            return result, pos
    raise WireError("proto: integer overflow")


def iter_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield (field number, wire type, value) for every item of a message, in wire order.

    A varint or fixed-width value is an unsigned int; a length-delimited value is bytes.
    A group (wire type 3, unused by Kubernetes) is skipped whole and yielded as b"" so a
    caller can still reject it for a known field.
    """
    pos = 0
    while pos < len(data):
        tag, pos = read_varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == END_GROUP:
            raise WireError("proto: unexpected end of group")
        if number <= 0 or number > MAX_FIELD_NUMBER:
            raise WireError(f"proto: illegal tag {number} (wire type {wire_type})")
        value, pos = _read_value(data, pos, wire_type)
        yield number, wire_type, value


def _read_value(data: bytes, pos: int, wire_type: int) -> tuple[int | bytes, int]:
    if wire_type == VARINT:
        return read_varint(data, pos)
    if wire_type == LENGTH_DELIMITED:
        length, pos = read_varint(data, pos)
        end = pos + length
        if end > len(data):
            raise WireError("unexpected EOF")
        return data[pos:end], end
    if wire_type in (FIXED64, FIXED32):
        width = 8 if wire_type == FIXED64 else 4
        if pos + width > len(data):
            raise WireError("unexpected EOF")
        return int.from_bytes(data[pos : pos + width], "little"), pos + width
    if wire_type == START_GROUP:
        return b"", _skip_group(data, pos)
    raise WireError(f"proto: illegal wireType {wire_type}")


def _skip_group(data: bytes, pos: int) -> int:
    """The position after the END_GROUP closing a group just opened (a loop, not recursion)."""
    depth = 1
    while depth:
        tag, pos = read_varint(data, pos)
        wire_type = tag & 7
        if wire_type == START_GROUP:
            depth += 1
        elif wire_type == END_GROUP:
            depth -= 1
        else:
            _, pos = _read_value(data, pos, wire_type)
    return pos


def read_packed_varints(data: bytes) -> list[int]:
    """The values of a packed repeated varint field."""
    values = []
    pos = 0
    while pos < len(data):
        value, pos = read_varint(data, pos)
        values.append(value)
    return values


def as_int64(value: int) -> int:
    """A varint read as a two's-complement int64."""
    return value - (1 << 64) if value >= 1 << 63 else value


def as_int32(value: int) -> int:
    """A varint read as an int32: protobuf keeps the low 32 bits."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value
