"""Taints and tolerations as the drain clients handle them (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubesim.types import Obj

from ..cluster.scheduling import toleration_tolerates

__all__ = ["has_taint_key", "pod_tolerates", "toleration_tolerates", "with_taint_replacing_key"]


def pod_tolerates(pod: Obj, taint: Mapping[str, Any]) -> bool:
    tolerations: Iterable[Mapping[str, Any]] = (pod.get("spec") or {}).get("tolerations") or []
    return any(toleration_tolerates(t, taint) for t in tolerations)


def has_taint_key(node: Obj, key: str) -> bool:
    return any(t.get("key") == key for t in (node.get("spec") or {}).get("taints") or [])


def with_taint_replacing_key(taints: Iterable[Obj], taint: Obj) -> list[Obj]:
    """Karpenter's Terminator.Taint: keep an identical taint, else replace any with its key."""
    current = list(taints)
    for existing in current:
        if (
            existing.get("key") == taint["key"]
            and (existing.get("value") or "") == (taint.get("value") or "")
            and existing.get("effect") == taint["effect"]
        ):
            return current
    return [t for t in current if t.get("key") != taint["key"]] + [taint]
