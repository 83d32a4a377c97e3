"""Matching a `metav1.LabelSelector` object against labels, in-process, for informer caches.

Follows `metav1.LabelSelectorAsSelector` (apimachinery/pkg/apis/meta/v1/helpers.go):
a missing (None) selector selects nothing, an empty one selects everything,
and `NotIn` / `DoesNotExist` match objects that lack the key. A selector that
upstream would reject (unknown operator, In without values) selects nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Labels = Mapping[str, str]


def _requirement_matches(expr: Any, labels: Labels) -> bool:
    if not isinstance(expr, dict):
        return False
    key = expr.get("key")
    operator = expr.get("operator")
    values = expr.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return False
    if operator == "In":
        return bool(values) and key in labels and labels[key] in values
    if operator == "NotIn":
        return bool(values) and (key not in labels or labels[key] not in values)
    if operator == "Exists":
        return not values and key in labels
    if operator == "DoesNotExist":
        return not values and key not in labels
    return False


def selector_matches(selector: Any, labels: Labels | None) -> bool:
    """Whether `selector` (a LabelSelector dict, or None) selects an object with `labels`."""
    if not isinstance(selector, dict):
        return False
    labels = labels or {}
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, dict):
        return False
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return False
    return all(_requirement_matches(expr, labels) for expr in expressions)


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
