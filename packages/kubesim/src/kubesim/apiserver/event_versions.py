"""core/v1 Event <-> events.k8s.io/v1 Event, the conversion the real server applies.

Both versions share one storage (core/v1), see
pkg/apis/events/v1/conversion.go upstream.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from kubesim.types import Obj

# (core/v1 field, events.k8s.io/v1 field) for fields that are plain renames.
_RENAMES = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("source", "deprecatedSource"),
    ("reportingComponent", "reportingController"),
)
_OMITTED_WHEN_EMPTY = ("reportingController", "reportingInstance", "action", "deprecatedCount")
_SAME = ("metadata", "reason", "type", "action", "related", "eventTime", "series",
         "reportingInstance")  # fmt: skip


def to_events_v1(core: Obj) -> Obj:
    out = _converted(core, "events.k8s.io/v1", _RENAMES)
    # Go's zero values: the core type always writes them, events.k8s.io/v1 omits these.
    for key in _OMITTED_WHEN_EMPTY:
        if out.get(key) in ("", 0):
            del out[key]
    return out


def to_core_event(v1: Obj) -> Obj:
    return _converted(v1, "v1", [(new, old) for old, new in _RENAMES])


def _converted(event: Obj, api_version: str, renames: Iterable[tuple[str, str]]) -> Obj:
    """`event` as an Event of `api_version`: the fields both versions name alike, then each
    (`event`'s name, the other version's name) of `renames`; every value a copy."""
    out: Obj = {"kind": "Event", "apiVersion": api_version}
    for key in _SAME:
        if key in event:
            out[key] = copy.deepcopy(event[key])
    for source, target in renames:
        if source in event:
            out[target] = copy.deepcopy(event[source])
    return out
