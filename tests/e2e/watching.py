"""What the end-to-end suites read off the objects they wait for. The wait itself is
`kubesim.watchlog.watch_until` (one watch, re-checked on every event, bounded so that a hang
fails the test instead of the run; nothing is asserted on time), shared with the benchmarks."""

from __future__ import annotations

import re
from typing import Any

from kubesim.watchlog import WATCH_BOUND

Obj = dict[str, Any]

BOUND = WATCH_BOUND  # every e2e wait on a watch: a guard against hangs only
# The controller's restarted-at and completed-at stamps: RFC 3339 in UTC with microseconds.
MICROSECOND_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def condition(obj: Obj | None, kind: str) -> Obj | None:
    """`obj`'s status condition of type `kind`, if it has one (`obj` must exist)."""
    assert obj is not None
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), None)


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
