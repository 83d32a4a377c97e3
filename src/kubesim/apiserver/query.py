"""Compile a list/watch request's namespace, labelSelector and fieldSelector into a predicate."""

from __future__ import annotations

from .resources import ResourceType
from .store import Obj, Predicate


def build_predicate(
    rt: ResourceType, namespace: str | None, label_selector: str, field_selector: str
) -> Predicate:
    checks: list[Predicate] = []
    if namespace:
        checks.append(lambda o: o["metadata"].get("namespace") == namespace)
    if label_selector.strip():
        from .selectors import parse_label_selector

        labels = parse_label_selector(label_selector)
        checks.append(lambda o: labels.matches(o["metadata"].get("labels") or {}))
    if field_selector.strip():
        from .selectors import parse_field_selector

        fields = parse_field_selector(field_selector, rt)
        checks.append(fields.matches)
    if not checks:
        return _everything
    if len(checks) == 1:
        return checks[0]
    return lambda o: all(check(o) for check in checks)


def _everything(obj: Obj) -> bool:
    return True
