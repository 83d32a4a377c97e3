"""Protocol-buffers wire format, the writing side: fields into bytes.

Schema-free, pure and dependency-free; the reading side is `protobuf.wire`. Only the
wire types kubesim writes: varint (bool, int32, int64, enum) and length-delimited
(string, bytes, nested message). A message is the concatenation of its fields, so a
caller builds one with `b"".join(...)` and nests it with `message_field`.
"""

from __future__ import annotations

from kubesim.apiserver.protobuf.wire import LENGTH_DELIMITED, MAX_FIELD_NUMBER, VARINT

_UINT64 = (1 << 64) - 1


def encode_varint(value: int) -> bytes:
    """An unsigned varint; a negative int goes on the wire as its 10-byte two's complement."""
    if not -(1 << 63) <= value <= _UINT64:
        raise ValueError(f"varint out of range: {value}")
    value &= _UINT64
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_tag(number: int, wire_type: int) -> bytes:
    if not 0 < number <= MAX_FIELD_NUMBER:
        raise ValueError(f"illegal field number {number}")
    return encode_varint(number << 3 | wire_type)


def varint_field(number: int, value: int) -> bytes:
    """An int32, int64, uint64, enum or bool field (a bool is 0 or 1)."""
    return encode_tag(number, VARINT) + encode_varint(int(value))


def bytes_field(number: int, value: bytes) -> bytes:
    """A bytes field, or a nested message already encoded."""
    return encode_tag(number, LENGTH_DELIMITED) + encode_varint(len(value)) + value


def string_field(number: int, value: str) -> bytes:
    return bytes_field(number, value.encode())


def message_field(number: int, *fields: bytes) -> bytes:
    """A nested message made of `fields`, each one already encoded."""
    return bytes_field(number, b"".join(fields))
