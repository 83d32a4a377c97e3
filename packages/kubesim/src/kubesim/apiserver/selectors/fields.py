"""Field selectors: parsing, per-kind field label conversion, and object field values.

Ports k8s.io/apimachinery/pkg/fields/selector.go (syntax and escaping), the
field label conversions kube-apiserver registers (pkg/apis/core/v1/conversion.go
and ``runtime.DefaultMetaV1FieldSelectorConversion``) and the selectable field
sets (``ToSelectableFields`` in pkg/registry/core/{pod,node,namespace,secret,
service,event,replicationcontroller}/strategy.go, pkg/registry/apps/replicaset).
Every failure raises :class:`SelectorError` carrying upstream's 400 message.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.apiserver.gofmt import go_quote
from kubesim.apiserver.selectors.labels import Operator, SelectorError


def escape_field_value(value: str) -> str:
    """fields.EscapeValue: backslash-escape ``\\``, ``,`` and ``=``."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_field_value(value: str) -> str:
    """fields.UnescapeValue; an unknown escape or a bare ``,``/``=`` raises SelectorError."""
    if not any(char in value for char in "\\,="):
        return value
    out: list[str] = []
    in_slash = False
    for char in value:
        if in_slash:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            in_slash = False
        elif char == "\\":
            in_slash = True
        elif char in ",=":
            # Upstream prints the rune with %v, i.e. as its code point.
            raise SelectorError(
                f"invalid field selector: unescaped character in value: {ord(char)}"
            )
        else:
            out.append(char)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(selector: str) -> list[str]:
    if not selector:
        return []
    terms = []
    start = 0
    in_slash = False
    for index, char in enumerate(selector):
        if in_slash:
            in_slash = False
        elif char == "\\":
            in_slash = True
        elif char == ",":
            terms.append(selector[start:index])
            start = index + 1
    terms.append(selector[start:])
    return terms


_TERM_OPERATORS = (("!=", Operator.NOT_EQUALS), ("==", Operator.EQUALS), ("=", Operator.EQUALS))


def _split_term(term: str) -> tuple[str, Operator, str] | None:
    for index in range(len(term)):
        for text, operator in _TERM_OPERATORS:
            if term.startswith(text, index):
                return term[:index], operator, term[index + len(text) :]
    return None


@dataclass(frozen=True)
class FieldRequirement:
    """``field=value`` (also written ``==``) or ``field!=value``."""

    field: str
    operator: Operator
    value: str

    def matches_fields(self, fields: Mapping[str, str]) -> bool:
        equal = fields.get(self.field, "") == self.value
        return equal if self.operator is Operator.EQUALS else not equal

    def __str__(self) -> str:
        shown = "=" if self.operator is Operator.EQUALS else "!="
        return f"{self.field}{shown}{escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """A compiled field selector: the AND of its terms, in upstream's (sorted) order."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any], *, kind: str | None = None) -> bool:
        """Match an API object (a JSON dict); ``kind`` defaults to ``obj["kind"]``."""
        return all(
            (field_value(obj, term.field, kind=kind) == term.value)
            == (term.operator is Operator.EQUALS)
            for term in self.requirements
        )

    def matches_fields(self, fields: Mapping[str, str]) -> bool:
        """Match a precomputed field set (:func:`selectable_fields`); absent fields are ``""``."""
        return all(term.matches_fields(fields) for term in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def requires_exact_match(self, field_name: str) -> str | None:
        for term in self.requirements:
            if term.field == field_name and term.operator is Operator.EQUALS:
                return term.value
        return None

    def __str__(self) -> str:
        return ",".join(str(term) for term in self.requirements)


def parse_field_selector(text: str) -> FieldSelector:
    """fields.ParseSelector: syntax only, no per-kind check (see :func:`compile_field_selector`).

    Terms are split on unescaped commas, sorted as raw text, and split at the
    first ``!=``, ``==`` or ``=``; blanks are kept as part of names and values.
    """
    terms = sorted(_split_terms(text))
    requirements = []
    for term in terms:
        if not term:
            continue
        parts = _split_term(term)
        if parts is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        lhs, operator, rhs = parts
        requirements.append(FieldRequirement(lhs, operator, unescape_field_value(rhs)))
    return FieldSelector(tuple(requirements))


_OBJECT_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})

# scheme.AddFieldLabelConversionFunc registrations, by (API group, kind).
# Kinds without one get runtime.DefaultMetaV1FieldSelectorConversion. Note
# that apps/v1 ReplicaSet has none, so kube-apiserver rejects
# ``status.replicas`` there (kubernetes/kubernetes#135136).
_FIELD_LABELS: dict[tuple[str, str], frozenset[str]] = {
    ("", "Pod"): frozenset(
        {
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        }
    ),
    ("", "Node"): frozenset({"metadata.name", "spec.unschedulable"}),
    ("", "ReplicationController"): frozenset(
        {"metadata.name", "metadata.namespace", "status.replicas"}
    ),
    ("", "Event"): frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        }
    ),
    ("", "Namespace"): frozenset({"status.phase", "metadata.name"}),
    ("", "Secret"): frozenset({"type", "metadata.namespace", "metadata.name"}),
    ("", "Service"): frozenset(
        {"metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"}
    ),
}
# events.k8s.io/v1 selects on the core Event's fields under their new names
# (AddFieldLabelConversionsForEvent, pkg/apis/events/v1/conversion.go).
_EVENTS_V1_LABELS = {
    **{f"regarding.{name}": f"involvedObject.{name}" for name in (
        "kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reportingController": "reportingComponent",
}  # fmt: skip
_FIELD_LABELS[("events.k8s.io", "Event")] = frozenset(
    {"reason", "type", "metadata.namespace", "metadata.name", *_EVENTS_V1_LABELS}
)
# Old v1 clients send spec.host; the Pod conversion renames it.
_FIELD_LABEL_RENAMES: dict[tuple[str, str], dict[str, str]] = {
    ("", "Pod"): {"spec.host": "spec.nodeName"},
    ("events.k8s.io", "Event"): _EVENTS_V1_LABELS,
}


def supported_field_labels(kind: str, *, group: str = "") -> frozenset[str]:
    """The field labels kube-apiserver accepts in a fieldSelector for this kind."""
    return _FIELD_LABELS.get((group, kind), _OBJECT_META_FIELDS)


def convert_field_label(kind: str, label: str, value: str, *, group: str = "") -> tuple[str, str]:
    """scheme.ConvertFieldLabel: the (label, value) to select on, or SelectorError."""
    registered = _FIELD_LABELS.get((group, kind))
    if registered is None:
        if label in _OBJECT_META_FIELDS:
            return label, value
        raise SelectorError(
            f'{go_quote(label)} is not a known field selector: only "metadata.name", '
            '"metadata.namespace"'
        )
    renamed = _FIELD_LABEL_RENAMES.get((group, kind), {}).get(label)
    if renamed is not None:
        return renamed, value
    if label in registered:
        return label, value
    raise SelectorError(f"field label not supported: {label}")


def compile_field_selector(text: str, kind: str, *, group: str = "") -> FieldSelector:
    """What a list or watch does with ``fieldSelector``: parse, then convert each term.

    Parse errors come first; then the first unsupported label in sorted term
    order. Either raises SelectorError with the upstream message (400).
    """
    parsed = parse_field_selector(text)
    converted = []
    for term in parsed.requirements:
        label, value = convert_field_label(kind, term.field, term.value, group=group)
        converted.append(FieldRequirement(label, term.operator, value))
    return FieldSelector(tuple(converted))


# --- selectable fields of an object (ToSelectableFields in pkg/registry/...) ---


def _go_string(value: Any) -> str:
    """A JSON scalar as Go prints the typed field: null/absent "", bools "true"/"false"."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _path(obj: Mapping[str, Any], dotted: str) -> Any:
    current: Any = obj
    for part in dotted.split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


_FieldGetter = Callable[[Mapping[str, Any]], str]


def _string_at(dotted: str) -> _FieldGetter:
    return lambda obj: _go_string(_path(obj, dotted))


def _bool_at(dotted: str) -> _FieldGetter:
    return lambda obj: "true" if _path(obj, dotted) is True else "false"


def _int_at(dotted: str) -> _FieldGetter:
    return lambda obj: _go_string(_path(obj, dotted) or 0)


def _pod_ip(obj: Mapping[str, Any]) -> str:
    # Upstream reads status.podIPs[0]; v1 -> internal conversion fills podIPs
    # from a lone status.podIP.
    pod_ips = _path(obj, "status.podIPs")
    if isinstance(pod_ips, list) and pod_ips and isinstance(pod_ips[0], Mapping):
        return _go_string(pod_ips[0].get("ip"))
    return _go_string(_path(obj, "status.podIP"))


def _event_source(obj: Mapping[str, Any]) -> str:
    return _go_string(_path(obj, "source.component")) or _go_string(
        _path(obj, "reportingComponent")
    )


_META_GETTERS: dict[str, _FieldGetter] = {
    "metadata.name": _string_at("metadata.name"),
    "metadata.namespace": _string_at("metadata.namespace"),
}
_KIND_GETTERS: dict[str, dict[str, _FieldGetter]] = {
    "Pod": {
        "spec.nodeName": _string_at("spec.nodeName"),
        "spec.restartPolicy": _string_at("spec.restartPolicy"),
        "spec.schedulerName": _string_at("spec.schedulerName"),
        "spec.serviceAccountName": _string_at("spec.serviceAccountName"),
        "spec.hostNetwork": _bool_at("spec.hostNetwork"),
        "status.phase": _string_at("status.phase"),
        "status.podIP": _pod_ip,
        "status.nominatedNodeName": _string_at("status.nominatedNodeName"),
    },
    "Node": {"spec.unschedulable": _bool_at("spec.unschedulable")},
    "Namespace": {"status.phase": _string_at("status.phase"), "name": _string_at("metadata.name")},
    "Secret": {"type": _string_at("type")},
    "Service": {
        "spec.clusterIP": _string_at("spec.clusterIP"),
        "spec.type": _string_at("spec.type"),
    },
    "ReplicationController": {"status.replicas": _int_at("status.replicas")},
    "ReplicaSet": {"status.replicas": _int_at("status.replicas")},
    "Event": {
        **{
            f"involvedObject.{name}": _string_at(f"involvedObject.{name}")
            for name in (
                "kind",
                "namespace",
                "name",
                "uid",
                "apiVersion",
                "resourceVersion",
                "fieldPath",
            )
        },
        "reason": _string_at("reason"),
        "reportingComponent": _string_at("reportingComponent"),
        "source": _event_source,
        "type": _string_at("type"),
    },
}


def field_value(obj: Mapping[str, Any], field_name: str, *, kind: str | None = None) -> str:
    """The value a field selector compares for ``field_name`` on ``obj``.

    As upstream's ``fields.Set.Get``: a field outside the kind's selectable set
    (``status.podIPs`` included) or absent from the object reads ``""``;
    booleans read ``"true"``/``"false"`` and counts their decimal form, with
    Go's zero values when absent. ``kind`` defaults to ``obj["kind"]``.
    """
    getter = _META_GETTERS.get(field_name)
    if getter is None:
        getter = _KIND_GETTERS.get(kind or str(obj.get("kind", "")), {}).get(field_name)
    return getter(obj) if getter is not None else ""


def selectable_fields(obj: Mapping[str, Any], *, kind: str | None = None) -> dict[str, str]:
    """The whole field set of ``obj`` (upstream ``ToSelectableFields``)."""
    getters = {**_META_GETTERS, **_KIND_GETTERS.get(kind or str(obj.get("kind", "")), {})}
    return {name: getter(obj) for name, getter in getters.items()}
