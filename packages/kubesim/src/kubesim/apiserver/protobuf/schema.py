"""Kubernetes protobuf message schemas, as data: field number -> JSON name, type and presence.

Field numbers come from the upstream generated.proto files (kubernetes/kubernetes,
staging/src/k8s.io/{api,apimachinery}/.../generated.proto); JSON names and presence
from the `json:"..."` tags of the matching Go types, so a decoded object is what the
same object looks like when a client sends it as JSON.

Most messages are generated from the upstream Go types (`protobuf.generated`, written by
scripts/gen-protobuf-schema for every kind kubesim serves); the ones here are written by
hand and take precedence: wrappers whose JSON form is not an object, and kinds whose proto
is not their Go shape. Serving a new kind: rerun the script; describing one by hand: its
messages in HAND_MESSAGES and its (apiVersion, kind) in HAND_KINDS.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from kubesim.apiserver.protobuf import generated

# Scalar types are decoded from the wire directly; "message" names an entry of MESSAGES.
# "json" is a bytes field holding JSON text (FieldsV1.raw), embedded as parsed JSON.
FieldType = Literal["string", "bytes", "bool", "int32", "int64", "json", "message"]
Label = Literal["optional", "repeated", "map"]  # maps are always map<string, value>

# How a field appears in JSON, from its Go type and `json` tag:
#   omitempty: a value with `omitempty`; left out when zero/empty.
#   pointer:   a pointer (or a struct pointer) with `omitempty`; present iff it was sent,
#              even when zero (gracePeriodSeconds: 0 matters).
#   nullable:  a pointer without `omitempty`; null when not sent.
#   always:    a value without `omitempty`, or a struct (encoding/json never omits structs);
#              the zero value when not sent (nil slices and maps are null).
#   inline:    an embedded struct (`json:",inline"`): its own message on the wire, its
#              fields merged into the enclosing object in JSON.
# A message field marked omitempty behaves as pointer.
Presence = Literal["omitempty", "pointer", "nullable", "always", "inline"]


@dataclass(frozen=True, slots=True)
class Field:
    number: int
    json_name: str
    type: FieldType
    message: str = ""  # for type "message": the MESSAGES key of the value
    label: Label = "optional"
    presence: Presence = "omitempty"


@dataclass(frozen=True, slots=True)
class Message:
    fields: tuple[Field, ...]
    # For wrapper types whose JSON form is not an object (Time, Quantity, IntOrString...):
    # turns the decoded fields, all present, into that form. May raise ValueError.
    to_json: Callable[[dict[str, Any]], Any] | None = None

    def field(self, number: int) -> Field | None:
        return next((f for f in self.fields if f.number == number), None)


# Constructors, so the tables below read like the .proto files they come from.


def string(number: int, name: str, presence: Presence = "omitempty") -> Field:
    return Field(number, name, "string", presence=presence)


def int32(number: int, name: str, presence: Presence = "omitempty") -> Field:
    return Field(number, name, "int32", presence=presence)


def int64(number: int, name: str, presence: Presence = "omitempty") -> Field:
    return Field(number, name, "int64", presence=presence)


def message(number: int, name: str, of: str, presence: Presence = "always") -> Field:
    """A nested message; by default a Go struct value, which JSON always carries."""
    return Field(number, name, "message", of, presence=presence)


def strings(number: int, name: str, presence: Presence = "omitempty") -> Field:
    return Field(number, name, "string", label="repeated", presence=presence)


def messages(number: int, name: str, of: str, presence: Presence = "omitempty") -> Field:
    return Field(number, name, "message", of, label="repeated", presence=presence)


def message_map(number: int, name: str, of: str) -> Field:
    return Field(number, name, "message", of, label="map")


# Wrapper types: their JSON form is a string or a number, not an object.


def _rfc3339(fields: dict[str, Any], micro: bool) -> str | None:
    seconds, nanos = fields["seconds"], fields["nanos"]
    if seconds == 0 and nanos == 0:
        return None  # the zero time.Time, which metav1.Time marshals as null
    try:
        moment = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds, microseconds=nanos // 1000)
    except OverflowError:
        raise ValueError(f"Time.MarshalJSON: year outside of range for {seconds}s") from None
    # Formatted by hand: strftime does not zero-pad years below 1000 everywhere.
    day = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
    clock = f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    if micro:  # metav1.RFC3339Micro
        return f"{day}T{clock}.{moment.microsecond:06d}Z"
    return f"{day}T{clock}Z"


def _time(fields: dict[str, Any]) -> str | None:
    return _rfc3339(fields, micro=False)


def _micro_time(fields: dict[str, Any]) -> str | None:
    return _rfc3339(fields, micro=True)


def _int_or_string(fields: dict[str, Any]) -> Any:
    return fields["strVal"] if fields["type"] == 1 else fields["intVal"]


def _quantity(fields: dict[str, Any]) -> Any:
    return fields["string"] or "0"


def _only(name: str) -> Callable[[dict[str, Any]], Any]:
    def unwrap(fields: dict[str, Any]) -> Any:
        return fields[name]

    return unwrap


_TIMESTAMP = (int64(1, "seconds", "always"), int32(2, "nanos", "always"))

META = "meta.v1"
TIME = f"{META}.Time"
MICRO_TIME = f"{META}.MicroTime"
OBJECT_META = f"{META}.ObjectMeta"
DELETE_OPTIONS = f"{META}.DeleteOptions"
INT_OR_STRING = "intstr.IntOrString"
QUANTITY = "resource.Quantity"


HAND_MESSAGES: Mapping[str, Message] = {
    # k8s.io/apimachinery/pkg/runtime/generated.proto: raw JSON, embedded as is
    "runtime.RawExtension": Message((Field(1, "raw", "json", presence="always"),), _only("raw")),
    # k8s.io/apimachinery/pkg/api/resource/generated.proto
    QUANTITY: Message((string(1, "string", "always"),), _quantity),
    # k8s.io/apimachinery/pkg/util/intstr/generated.proto
    INT_OR_STRING: Message(
        (int64(1, "type", "always"), int32(2, "intVal", "always"),
         string(3, "strVal", "always")),
        _int_or_string,
    ),
    # k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto
    TIME: Message(_TIMESTAMP, _time),
    MICRO_TIME: Message(_TIMESTAMP, _micro_time),
    f"{META}.FieldsV1": Message((Field(1, "raw", "json", presence="always"),), _only("raw")),
    # k8s.io/api/policy/v1beta1/generated.proto (the same Eviction as policy/v1's)
    "policy.Eviction": Message((
        message(1, "metadata", OBJECT_META),
        message(2, "deleteOptions", DELETE_OPTIONS, "pointer"),
    )),
    # k8s.io/api/authorization/v1/generated.proto
    "authorization.v1.SubjectAccessReviewSpec": Message((
        message(1, "resourceAttributes", "authorization.v1.ResourceAttributes", "pointer"),
        message(2, "nonResourceAttributes", "authorization.v1.NonResourceAttributes", "pointer"),
        string(3, "user"),
        strings(4, "groups"),
        message_map(5, "extra", "authorization.v1.ExtraValue"),
        string(6, "uid"),
    )),
    "authorization.v1.FieldSelectorAttributes": Message((
        string(1, "rawSelector"),
        messages(2, "requirements", "authorization.v1.FieldSelectorRequirement"),
    )),
    "authorization.v1.FieldSelectorRequirement": Message((
        string(1, "key", "always"),
        string(2, "operator", "always"),
        strings(3, "values"),
    )),
    # ExtraValue is a Go []string: its JSON form is the list (null when empty).
    "authorization.v1.ExtraValue": Message((strings(1, "items", "always"),), _only("items")),
    # k8s.io/api/authentication/v1/generated.proto
    # authentication.k8s.io v1, v1beta1 and v1alpha1 share this shape.
    "authentication.v1.UserInfo": Message((
        string(1, "username"),
        string(2, "uid"),
        strings(3, "groups"),
        message_map(4, "extra", "authentication.v1.ExtraValue"),
    )),
    "authentication.v1.ExtraValue": Message((strings(1, "items", "always"),), _only("items")),
}  # fmt: skip

# Options kinds are registered in every group version (metav1.AddToGroupVersion), so a
# DELETE body may say "v1", "apps/v1" or "meta.k8s.io/v1".
ANY_VERSION = "*"

HAND_KINDS: Mapping[tuple[str, str], str] = {
    ("policy/v1beta1", "Eviction"): "policy.Eviction",
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"):
        "authorization.v1.SubjectAccessReview",
    ("authentication.k8s.io/v1beta1", "SelfSubjectReview"): "authentication.v1.SelfSubjectReview",
    ("authentication.k8s.io/v1alpha1", "SelfSubjectReview"):
        "authentication.v1.SelfSubjectReview",
    (ANY_VERSION, "DeleteOptions"): DELETE_OPTIONS,
}  # fmt: skip


def generated_message(fields: generated.FIELDS) -> Message:
    return Message(tuple(
        Field(number, name, cast(FieldType, type_), of, cast(Label, label),
              cast(Presence, presence))
        for number, name, type_, of, label, presence in fields
    ))  # fmt: skip


MESSAGES: Mapping[str, Message] = {
    **{key: generated_message(fields) for key, fields in generated.MESSAGES.items()},
    **HAND_MESSAGES,
}
KINDS: Mapping[tuple[str, str], str] = {**generated.KINDS, **HAND_KINDS}


def message_for(api_version: str, kind: str) -> str | None:
    """The MESSAGES key of a top-level kind, or None when kubesim has no schema for it."""
    return KINDS.get((api_version, kind)) or KINDS.get((ANY_VERSION, kind))
