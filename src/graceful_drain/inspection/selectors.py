"""metav1.LabelSelector matching (matchLabels and matchExpressions), for PodDisruptionBudget
selectors and the webhook configuration's namespaceSelector/objectSelector."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(key): str(value) for key, value in labels.items()}


def _requirement_matches(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(requirement.get("key", ""))
    operator = requirement.get("operator")
    values = [str(value) for value in requirement.get("values") or []]
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False  # an unknown operator is invalid: upstream selects nothing


def selector_matches(
    selector: Mapping[str, Any] | None, labels: Mapping[str, str], *, empty_matches_all: bool
) -> bool:
    """Whether `labels` satisfy `selector`. An empty selector matches everything for a webhook
    and for policy/v1 PodDisruptionBudgets; a missing (null) one matches nothing for a budget,
    so the caller says what None means through `empty_matches_all`."""
    if selector is None:
        return empty_matches_all
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(str(key)) != str(value):
            return False
    return all(
        _requirement_matches(requirement, labels)
        for requirement in selector.get("matchExpressions") or []
    )
