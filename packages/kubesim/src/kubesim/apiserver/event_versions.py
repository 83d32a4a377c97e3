"""core/v1 Event <-> events.k8s.io/v1 Event, the conversion the real server applies.

Both versions share one storage (core/v1), see
pkg/apis/events/v1/conversion.go upstream.
"""

from __future__ import annotations

import copy

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
    out: Obj = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
    for key in _SAME:
        if key in core:
            out[key] = copy.deepcopy(core[key])
    for old, new in _RENAMES:
        if old in core:
            out[new] = copy.deepcopy(core[old])
    # Go's zero values: the core type always writes them, events.k8s.io/v1 omits these.
    for key in _OMITTED_WHEN_EMPTY:
        if out.get(key) in ("", 0):
            del out[key]
    return out


def to_core_event(v1: Obj) -> Obj:
    out: Obj = {"kind": "Event", "apiVersion": "v1"}
    for key in _SAME:
        if key in v1:
            out[key] = copy.deepcopy(v1[key])
    for old, new in _RENAMES:
        if new in v1:
            out[old] = copy.deepcopy(v1[new])
    return out
