"""Compile a list/watch request's namespace, labelSelector and fieldSelector into a predicate."""

from __future__ import annotations

from kubesim.types import Obj

from .errors import bad_request
from .resources import ResourceType
from .selectors import SelectorError, compile_field_selector, parse_label_selector
from .store import Predicate


def build_predicate(
    rt: ResourceType, namespace: str | None, label_selector: str, field_selector: str
) -> Predicate:
    checks: list[Predicate] = []
    if namespace:
        checks.append(lambda o: o["metadata"].get("namespace") == namespace)
    try:
        if label_selector.strip():
            labels = parse_label_selector(label_selector)
            checks.append(lambda o: labels.matches(o["metadata"].get("labels") or {}))
        if field_selector.strip():
            fields = compile_field_selector(field_selector, rt.kind, group=rt.group)
            checks.append(lambda o: fields.matches(o, kind=rt.kind))
    except SelectorError as err:
        raise bad_request(str(err)) from None
    if not checks:
        return match_everything
    if len(checks) == 1:
        return checks[0]
    return lambda o: all(check(o) for check in checks)


def match_everything(obj: Obj) -> bool:
    return True
