"""Compiled label selectors: requirements, matching, and ``metav1.LabelSelector`` objects.

Ports k8s.io/apimachinery/pkg/labels/selector.go (``Requirement``,
``NewRequirement``, ``internalSelector``) and ``metav1.LabelSelectorAsSelector``
(staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go). The string
parser lives in :mod:`kubesim.apiserver.selectors.label_parser`.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kubesim.apiserver.gofmt import go_aggregate, go_quote, go_string_slice
from kubesim.apiserver.selectors.label_validation import (
    field_invalid,
    label_key_errors,
    label_value_errors,
)


class SelectorError(ValueError):
    """A selector kube-apiserver rejects with 400 BadRequest; ``str()`` is upstream's message."""


# --- label selector requirements ---


class Operator(StrEnum):
    """selection.Operator; the values are upstream's."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    GREATER_THAN = "gt"
    LESS_THAN = "lt"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


SET_OPERATORS = frozenset({Operator.IN, Operator.NOT_IN})
_EXACT_OPERATORS = frozenset({Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS})
EXISTENCE_OPERATORS = frozenset({Operator.EXISTS, Operator.DOES_NOT_EXIST})
_ORDER_OPERATORS = frozenset({Operator.GREATER_THAN, Operator.LESS_THAN})
_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _go_parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None where Go returns an error."""
    if not _INT64_RE.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


@dataclass(frozen=True)
class Requirement:
    """One ``key op values`` term. Build validated ones with :func:`new_requirement`."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()
    _value_set: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_value_set", frozenset(self.values))

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            value = labels.get(self.key)
            return value is not None and value in self._value_set
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            value = labels.get(self.key)
            return value is None or value not in self._value_set
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        value = labels.get(self.key)
        if value is None or len(self.values) != 1:
            return False
        have, want = _go_parse_int64(value), _go_parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op is Operator.GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.operator
        prefix = "!" if op is Operator.DOES_NOT_EXIST else ""
        if op in EXISTENCE_OPERATORS:
            return prefix + self.key
        shown = {
            Operator.EQUALS: "=",
            Operator.DOUBLE_EQUALS: "==",
            Operator.NOT_EQUALS: "!=",
            Operator.IN: " in ",
            Operator.NOT_IN: " notin ",
            Operator.GREATER_THAN: ">",
            Operator.LESS_THAN: "<",
        }[op]
        values = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if op in SET_OPERATORS:
            values = f"({values})"
        return f"{self.key}{shown}{values}"


def _requirement_errors(key: str, op: Operator, values: Sequence[str] | None) -> list[str]:
    """labels.NewRequirement's validation, as formatted field errors (nil path)."""
    errors = []
    key_errors = label_key_errors(key)
    if key_errors:
        errors.append(field_invalid("key", go_quote(key), "; ".join(key_errors)))
    count = len(values or ())
    if op in SET_OPERATORS and count == 0:
        errors.append(
            field_invalid(
                "values",
                go_string_slice(values),
                "for 'in', 'notin' operators, values set can't be empty",
            )
        )
    elif op in _EXACT_OPERATORS and count != 1:
        errors.append(
            field_invalid(
                "values",
                go_string_slice(values),
                "exact-match compatibility requires one single value",
            )
        )
    elif op in EXISTENCE_OPERATORS and count != 0:
        errors.append(
            field_invalid(
                "values",
                go_string_slice(values),
                "values set must be empty for exists and does not exist",
            )
        )
    elif op in _ORDER_OPERATORS:
        if count != 1:
            errors.append(
                field_invalid(
                    "values",
                    go_string_slice(values),
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                )
            )
        for index, value in enumerate(values or ()):
            if _go_parse_int64(value) is None:
                errors.append(
                    field_invalid(
                        f"values[{index}]",
                        go_quote(value),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )
                )
    for index, value in enumerate(values or ()):
        msgs = label_value_errors(value)
        if msgs:
            errors.append(
                field_invalid(f"values[{index}][{key}]", go_quote(value), "; ".join(msgs))
            )
    return errors


def new_requirement(key: str, operator: Operator, values: Sequence[str] | None = ()) -> Requirement:
    """labels.NewRequirement: validate, keep the values in the given order.

    ``values=None`` stands for a Go nil slice; it only changes error texts.
    """
    errors = _requirement_errors(key, operator, values)
    if errors:
        raise SelectorError(go_aggregate(errors))
    return Requirement(key, operator, tuple(values or ()))


# --- compiled label selector ---


@dataclass(frozen=True)
class LabelSelector:
    """A compiled label selector: the AND of its requirements, sorted by key.

    ``matches_nothing`` marks ``labels.Nothing()`` (a null ``metav1.LabelSelector``).
    """

    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.matches_nothing:
            return False
        return all(requirement.matches(labels) for requirement in self.requirements)

    @property
    def empty(self) -> bool:
        """``Selector.Empty()``: restricts nothing. False for the match-nothing selector."""
        return not self.matches_nothing and not self.requirements

    def requires_exact_match(self, key: str) -> str | None:
        """``RequiresExactMatch``: the single value the selector pins ``key`` to, if any."""
        for requirement in self.requirements:
            if requirement.key == key:
                exact = requirement.operator in (
                    Operator.EQUALS,
                    Operator.DOUBLE_EQUALS,
                    Operator.IN,
                )
                if exact and len(requirement.values) == 1:
                    return requirement.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(matches_nothing=True)


def sorted_by_key(requirements: Iterable[Requirement]) -> tuple[Requirement, ...]:
    # Go's sort.Sort(ByKey) is an insertion sort (stable) for the small
    # selectors met in practice; a stable sort keeps equal keys in input order.
    return tuple(sorted(requirements, key=lambda requirement: requirement.key))


def label_selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """labels.SelectorFromSet: ``key=value`` per entry, unvalidated; empty or None matches all."""
    if not labels:
        return EVERYTHING
    return LabelSelector(
        sorted_by_key(Requirement(k, Operator.EQUALS, (v,)) for k, v in labels.items())
    )


_METAV1_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def label_selector_from_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """metav1.LabelSelectorAsSelector for a ``{matchLabels, matchExpressions}`` dict.

    A null selector (``None``) matches nothing; ``{}`` (no labels, no
    expressions) matches everything. Where each applies upstream:

    * ``spec.selector`` of Deployments, ReplicaSets, StatefulSets, DaemonSets:
      required and non-empty by validation; the controllers' reverse lookups
      (which owner selects this pod?) also skip an ``empty`` selector ("a nil or
      empty selector ... should match nothing, not everything").
    * PodDisruptionBudget ``policy/v1``: ``{}`` selects every pod of the
      namespace (client-go's PDB lister: "here we let an empty selector match
      everything"), null selects none. The eviction subresource's own PDB
      lookup (pkg/registry/core/pod/storage/eviction.go) skips ``empty``
      selectors; a caller mirroring it checks :attr:`LabelSelector.empty`.
    * Admission webhooks' ``namespaceSelector``/``objectSelector``: defaulted
      to ``{}`` by the API server, so an absent selector matches everything;
      only a selector still null after defaulting would match nothing.

    Raises :class:`SelectorError` with upstream's text for an unknown
    operator or an invalid key or value; the first failing entry wins, with
    ``matchLabels`` checked in key order before ``matchExpressions``.
    """
    if selector is None:
        return NOTHING
    try:
        key: Any = (
            # the value's type too: 1 and True are equal keys, not equal selectors
            tuple(
                sorted((k, v.__class__, v) for k, v in (selector.get("matchLabels") or {}).items())
            ),
            repr(selector.get("matchExpressions")),
        )
        known = _COMPILED.get(key)
    except TypeError:  # something unhashable where a string belongs: compiled afresh
        return _compile(selector)
    if known is None:
        try:
            known = _compile(selector)
        except SelectorError as err:
            known = str(err)
        if len(_COMPILED) >= _COMPILED_LIMIT:
            _COMPILED.clear()
        _COMPILED[key] = known
    if isinstance(known, str):
        raise SelectorError(known)
    return known


# Compiled selectors (or the error text) by content: controllers match one owner's selector
# against every pod of a namespace, and the eviction subresource every budget's against the
# pod, on each call; compiling is most of the cost of one match.
_COMPILED: dict[Any, LabelSelector | str] = {}
_COMPILED_LIMIT = 4096


def _compile(selector: Mapping[str, Any]) -> LabelSelector:
    match_labels: Mapping[str, str] = selector.get("matchLabels") or {}
    match_expressions: Sequence[Mapping[str, Any]] = selector.get("matchExpressions") or ()
    if not match_labels and not match_expressions:
        return EVERYTHING
    requirements = [
        new_requirement(key, Operator.EQUALS, [match_labels[key]]) for key in sorted(match_labels)
    ]
    for expression in match_expressions:
        raw_operator = str(expression.get("operator", ""))
        operator = _METAV1_OPERATORS.get(raw_operator)
        if operator is None:
            raise SelectorError(f"{go_quote(raw_operator)} is not a valid pod selector operator")
        raw_values = expression.get("values")
        values = list(raw_values) if raw_values else None
        requirements.append(new_requirement(str(expression.get("key", "")), operator, values))
    return LabelSelector(sorted_by_key(requirements))
