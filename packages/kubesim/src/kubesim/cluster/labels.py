"""Label helpers for the controllers' informer caches, over the API server's selector code.

Follows `metav1.LabelSelectorAsSelector` (apimachinery/pkg/apis/meta/v1/helpers.go):
a missing (None) selector selects nothing, an empty one selects everything,
and `NotIn` / `DoesNotExist` match objects that lack the key. A selector that
upstream would reject (unknown operator, In without values) selects nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..apiserver.selectors import SelectorError, label_selector_from_object

Labels = Mapping[str, str]


def selector_matches(selector: Any, labels: Labels | None) -> bool:
    """Whether `selector` (a LabelSelector dict, or None) selects an object with `labels`."""
    if selector is not None and not isinstance(selector, dict):
        return False
    try:
        return label_selector_from_object(selector).matches(labels or {})
    except SelectorError:
        return False


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
