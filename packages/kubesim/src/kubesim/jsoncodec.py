"""kubesim's JSON: what its API server writes (list pages, objects, watch events) and reads,
and the deep copies its registry takes, all through msgspec.

`dumps` gives what `json.dumps(body, separators=(",", ":")).encode()` gives, except that
non-ASCII text is written as UTF-8 rather than as \\u escapes (as the real API server does);
it costs a tenth as much, which matters for list pages of 500 pods. For what msgspec refuses
(a lone surrogate, an integer beyond 64 bits) it falls back to json.dumps; NaN and infinity,
which are not JSON, come out as null. `loads` is json.loads, faster, and `copy` is
copy.deepcopy for a JSON document, about eight times faster than deepcopy.
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
    return b'{"type":' + dumps(type_) + b',"object":' + dumps(obj) + b"}\n"


class WatchLines:
    """Watch-stream lines, each encoded once for every watch it goes to.

    The store never mutates an object after commit, so one object (by identity) under one
    event type always encodes to the same line: a change fanned out to N watchers of its
    collection costs one encoding, not N. The newest `size` lines are kept, each with its
    object (so no other object can take its id while it is cached).
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._lines: dict[tuple[str, int], tuple[Any, bytes]] = {}

    def line(self, type_: str, obj: Any) -> bytes:
        key = (type_, id(obj))
        cached = self._lines.get(key)
        if cached is not None and cached[0] is obj:
            return cached[1]
        line = watch_event(type_, obj)
        if len(self._lines) >= self._size:
            del self._lines[next(iter(self._lines))]  # the oldest
        self._lines[key] = (obj, line)
        return line
