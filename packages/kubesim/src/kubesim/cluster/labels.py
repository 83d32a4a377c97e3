"""Label helpers for the controllers' informer caches, over the API server's selector code.

Follows `metav1.LabelSelectorAsSelector` (apimachinery/pkg/apis/meta/v1/helpers.go):
a missing (None) selector selects nothing, an empty one selects everything,
and `NotIn` / `DoesNotExist` match objects that lack the key. A selector that
upstream would reject (unknown operator, In without values) selects nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..apiserver.selectors import LabelSelector, SelectorError, label_selector_from_object

Labels = Mapping[str, str]

# Compiled selectors by content: the controllers match one owner's selector against every pod
# of its namespace on each sync, and compiling it is most of the cost of one match.
_COMPILED: dict[Any, LabelSelector | None] = {}  # None: invalid, selects nothing
_COMPILED_LIMIT = 4096


def _compiled(selector: dict[str, Any]) -> LabelSelector | None:
    try:
        key: Any = (
            tuple(sorted((selector.get("matchLabels") or {}).items())),
            repr(selector.get("matchExpressions")),
        )
        cached = _COMPILED.get(key, _COMPILED)
    except TypeError:  # something unhashable where a string belongs: no cache
        key, cached = None, _COMPILED
    if cached is not _COMPILED:
        return cached  # type: ignore[return-value]
    try:
        compiled: LabelSelector | None = label_selector_from_object(selector)
    except SelectorError:
        compiled = None
    if key is not None:
        if len(_COMPILED) >= _COMPILED_LIMIT:
            _COMPILED.clear()
        _COMPILED[key] = compiled
    return compiled


def selector_matches(selector: Any, labels: Labels | None) -> bool:
    """Whether `selector` (a LabelSelector dict, or None) selects an object with `labels`."""
    if selector is None:
        return False  # a null selector selects nothing
    if not isinstance(selector, dict):
        return False
    compiled = _compiled(selector)
    return compiled is not None and compiled.matches(labels or {})


def selects_everything(selector: Any) -> bool:
    """An empty, non-nil selector: upstream's controllers refuse to act on it."""
    return (
        isinstance(selector, dict)
        and not selector.get("matchLabels")
        and not selector.get("matchExpressions")
    )


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return dict(labels) if isinstance(labels, dict) else {}
