"""kubesim's JSON: what its API server writes (list pages, objects, watch events) and reads,
and the deep copies its registry takes, all through msgspec.

`dumps` gives what `json.dumps(body, separators=(",", ":")).encode()` gives, except that
non-ASCII text is written as UTF-8 rather than as \\u escapes (as the real API server does);
it costs far less, which matters for list pages of 500 pods. For what msgspec refuses
(a lone surrogate, an integer beyond 64 bits) it falls back to json.dumps; NaN and infinity,
which are not JSON, come out as null. `loads` is json.loads, faster, and `copy` is
copy.deepcopy for a JSON document, without deepcopy's per-object bookkeeping.
"""

from __future__ import annotations

import copy as _copy
import json
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def dumps(body: Any) -> bytes:
    try:
        return _encoder.encode(body)
    except (TypeError, ValueError, OverflowError):  # UnicodeEncodeError is a ValueError
        return json.dumps(body, separators=(",", ":")).encode()


def loads(raw: bytes | str) -> Any:
    """json.loads: the same values, the same errors (msgspec's refusals are retried there)."""
    try:
        return _decoder.decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw)


def copy(document: T) -> T:
    """A deep copy of a JSON document, as decoding its encoding gives it: tuples come back as
    lists, as they would through the API. What msgspec cannot encode is deep-copied as is."""
    try:
        copied: T = _decoder.decode(_encoder.encode(document))
        return copied
    except (TypeError, ValueError, OverflowError):
        return _copy.deepcopy(document)


def watch_event(type_: str, obj: Any) -> bytes:
    """One line of a watch stream: {"type":...,"object":...} and a newline."""
    return watch_line(type_, dumps(obj))


def watch_line(type_: str, encoded_object: bytes) -> bytes:
    """`watch_event` for an object already encoded by `dumps`."""
    return b'{"type":' + dumps(type_) + b',"object":' + encoded_object + b"}\n"
