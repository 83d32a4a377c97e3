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


def boolean(number: int, name: str, presence: Presence = "omitempty") -> Field:
    return Field(number, name, "bool", presence=presence)


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


def string_map(number: int, name: str) -> Field:
    return Field(number, name, "string", label="map")


def bytes_map(number: int, name: str) -> Field:
    return Field(number, name, "bytes", label="map")


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
LABEL_SELECTOR = f"{META}.LabelSelector"
INT_OR_STRING = "intstr.IntOrString"
QUANTITY = "resource.Quantity"


def with_spec_and_status(spec: str, status: str) -> Message:
    """The usual top-level kind: metadata 1, spec 2, status 3 (struct values, always sent)."""
    return Message((
        message(1, "metadata", OBJECT_META),
        message(2, "spec", spec),
        message(3, "status", status),
    ))  # fmt: skip


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
    f"{META}.OwnerReference": Message((
        string(5, "apiVersion", "always"),
        string(1, "kind", "always"),
        string(3, "name", "always"),
        string(4, "uid", "always"),
        boolean(6, "controller", "pointer"),
        boolean(7, "blockOwnerDeletion", "pointer"),
    )),
    f"{META}.ManagedFieldsEntry": Message((
        string(1, "manager"),
        string(2, "operation"),
        string(3, "apiVersion"),
        message(4, "time", TIME, "pointer"),
        string(6, "fieldsType"),
        message(7, "fieldsV1", f"{META}.FieldsV1", "pointer"),
        string(8, "subresource"),
    )),
    OBJECT_META: Message((
        string(1, "name"),
        string(2, "generateName"),
        string(3, "namespace"),
        string(4, "selfLink"),
        string(5, "uid"),
        string(6, "resourceVersion"),
        int64(7, "generation"),
        message(8, "creationTimestamp", TIME),
        message(9, "deletionTimestamp", TIME, "pointer"),
        int64(10, "deletionGracePeriodSeconds", "pointer"),
        string_map(11, "labels"),
        string_map(12, "annotations"),
        messages(13, "ownerReferences", f"{META}.OwnerReference"),
        strings(14, "finalizers"),
        messages(17, "managedFields", f"{META}.ManagedFieldsEntry"),
    )),
    f"{META}.Preconditions": Message((
        string(1, "uid", "pointer"),
        string(2, "resourceVersion", "pointer"),
    )),
    DELETE_OPTIONS: Message((
        int64(1, "gracePeriodSeconds", "pointer"),
        message(2, "preconditions", f"{META}.Preconditions", "pointer"),
        boolean(3, "orphanDependents", "pointer"),
        string(4, "propagationPolicy", "pointer"),
        strings(5, "dryRun"),
        boolean(6, "ignoreStoreReadErrorWithClusterBreakingPotential", "pointer"),
    )),
    LABEL_SELECTOR: Message((
        string_map(1, "matchLabels"),
        messages(2, "matchExpressions", f"{META}.LabelSelectorRequirement"),
    )),
    f"{META}.LabelSelectorRequirement": Message((
        string(1, "key", "always"),
        string(2, "operator", "always"),
        strings(3, "values"),
    )),
    f"{META}.Condition": Message((
        string(1, "type", "always"),
        string(2, "status", "always"),
        int64(3, "observedGeneration"),
        message(4, "lastTransitionTime", TIME),
        string(5, "reason", "always"),
        string(6, "message", "always"),
    )),
    # k8s.io/api/core/v1/generated.proto
    "core.v1.ConfigMap": Message((
        message(1, "metadata", OBJECT_META),
        boolean(4, "immutable", "pointer"),
        string_map(2, "data"),
        bytes_map(3, "binaryData"),
    )),
    "core.v1.Secret": Message((
        message(1, "metadata", OBJECT_META),
        boolean(5, "immutable", "pointer"),
        bytes_map(2, "data"),
        string_map(4, "stringData"),
        string(3, "type"),
    )),
    "core.v1.Namespace": with_spec_and_status("core.v1.NamespaceSpec", "core.v1.NamespaceStatus"),
    "core.v1.NamespaceSpec": Message((strings(1, "finalizers"),)),
    "core.v1.NamespaceStatus": Message((
        string(1, "phase"),
        messages(2, "conditions", "core.v1.NamespaceCondition"),
    )),
    "core.v1.NamespaceCondition": Message((
        string(1, "type", "always"),
        string(2, "status", "always"),
        message(4, "lastTransitionTime", TIME),
        string(5, "reason"),
        string(6, "message"),
    )),
    "core.v1.ServiceAccount": Message((
        message(1, "metadata", OBJECT_META),
        messages(2, "secrets", "core.v1.ObjectReference"),
        messages(3, "imagePullSecrets", "core.v1.LocalObjectReference"),
        boolean(4, "automountServiceAccountToken", "pointer"),
    )),
    "core.v1.ObjectReference": Message((
        string(1, "kind"),
        string(2, "namespace"),
        string(3, "name"),
        string(4, "uid"),
        string(5, "apiVersion"),
        string(6, "resourceVersion"),
        string(7, "fieldPath"),
    )),
    "core.v1.LocalObjectReference": Message((string(1, "name"),)),
    # k8s.io/api/policy/{v1,v1beta1}/generated.proto (the same Eviction in both)
    "policy.Eviction": Message((
        message(1, "metadata", OBJECT_META),
        message(2, "deleteOptions", DELETE_OPTIONS, "pointer"),
    )),
    "policy.v1.PodDisruptionBudget": with_spec_and_status(
        "policy.v1.PodDisruptionBudgetSpec", "policy.v1.PodDisruptionBudgetStatus"
    ),
    "policy.v1.PodDisruptionBudgetSpec": Message((
        message(1, "minAvailable", INT_OR_STRING, "pointer"),
        message(2, "selector", LABEL_SELECTOR, "pointer"),
        message(3, "maxUnavailable", INT_OR_STRING, "pointer"),
        string(4, "unhealthyPodEvictionPolicy", "pointer"),
    )),
    "policy.v1.PodDisruptionBudgetStatus": Message((
        int64(1, "observedGeneration"),
        message_map(2, "disruptedPods", TIME),
        int32(3, "disruptionsAllowed", "always"),
        int32(4, "currentHealthy", "always"),
        int32(5, "desiredHealthy", "always"),
        int32(6, "expectedPods", "always"),
        messages(7, "conditions", f"{META}.Condition"),
    )),
    # k8s.io/api/authorization/v1/generated.proto
    "authorization.v1.SelfSubjectAccessReview": with_spec_and_status(
        "authorization.v1.SelfSubjectAccessReviewSpec", "authorization.v1.SubjectAccessReviewStatus"
    ),
    "authorization.v1.SubjectAccessReview": with_spec_and_status(
        "authorization.v1.SubjectAccessReviewSpec", "authorization.v1.SubjectAccessReviewStatus"
    ),
    "authorization.v1.SelfSubjectAccessReviewSpec": Message((
        message(1, "resourceAttributes", "authorization.v1.ResourceAttributes", "pointer"),
        message(2, "nonResourceAttributes", "authorization.v1.NonResourceAttributes", "pointer"),
    )),
    "authorization.v1.SubjectAccessReviewSpec": Message((
        message(1, "resourceAttributes", "authorization.v1.ResourceAttributes", "pointer"),
        message(2, "nonResourceAttributes", "authorization.v1.NonResourceAttributes", "pointer"),
        string(3, "user"),
        strings(4, "groups"),
        message_map(5, "extra", "authorization.v1.ExtraValue"),
        string(6, "uid"),
    )),
    "authorization.v1.ResourceAttributes": Message((
        string(1, "namespace"),
        string(2, "verb"),
        string(3, "group"),
        string(4, "version"),
        string(5, "resource"),
        string(6, "subresource"),
        string(7, "name"),
        message(8, "fieldSelector", "authorization.v1.FieldSelectorAttributes", "pointer"),
        message(9, "labelSelector", "authorization.v1.LabelSelectorAttributes", "pointer"),
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
    "authorization.v1.LabelSelectorAttributes": Message((
        string(1, "rawSelector"),
        messages(2, "requirements", f"{META}.LabelSelectorRequirement"),
    )),
    "authorization.v1.NonResourceAttributes": Message((
        string(1, "path"),
        string(2, "verb"),
    )),
    "authorization.v1.SubjectAccessReviewStatus": Message((
        boolean(1, "allowed", "always"),
        boolean(4, "denied"),
        string(2, "reason"),
        string(3, "evaluationError"),
    )),
    "authorization.v1.SelfSubjectRulesReview": with_spec_and_status(
        "authorization.v1.SelfSubjectRulesReviewSpec", "authorization.v1.SubjectRulesReviewStatus"
    ),
    "authorization.v1.SelfSubjectRulesReviewSpec": Message((string(1, "namespace"),)),
    "authorization.v1.SubjectRulesReviewStatus": Message((
        messages(1, "resourceRules", "authorization.v1.ResourceRule", "always"),
        messages(2, "nonResourceRules", "authorization.v1.NonResourceRule", "always"),
        boolean(3, "incomplete", "always"),
        string(4, "evaluationError"),
    )),
    "authorization.v1.ResourceRule": Message((
        strings(1, "verbs", "always"),
        strings(2, "apiGroups"),
        strings(3, "resources"),
        strings(4, "resourceNames"),
    )),
    "authorization.v1.NonResourceRule": Message((
        strings(1, "verbs", "always"),
        strings(2, "nonResourceURLs"),
    )),
    # ExtraValue is a Go []string: its JSON form is the list (null when empty).
    "authorization.v1.ExtraValue": Message((strings(1, "items", "always"),), _only("items")),
    # k8s.io/api/authentication/v1/generated.proto
    "authentication.v1.TokenRequest": with_spec_and_status(
        "authentication.v1.TokenRequestSpec", "authentication.v1.TokenRequestStatus"
    ),
    "authentication.v1.TokenRequestSpec": Message((
        strings(1, "audiences", "always"),
        int64(4, "expirationSeconds", "nullable"),
        message(3, "boundObjectRef", "authentication.v1.BoundObjectReference", "nullable"),
    )),
    "authentication.v1.TokenRequestStatus": Message((
        string(1, "token", "always"),
        message(2, "expirationTimestamp", TIME),
    )),
    "authentication.v1.BoundObjectReference": Message((
        string(1, "kind"),
        string(2, "apiVersion"),  # proto name aPIVersion in older releases
        string(3, "name"),
        string(4, "uid"),  # proto name uID
    )),
    # authentication.k8s.io v1, v1beta1 and v1alpha1 share this shape.
    "authentication.v1.SelfSubjectReview": Message((
        message(1, "metadata", OBJECT_META),
        message(2, "status", "authentication.v1.SelfSubjectReviewStatus"),
    )),
    "authentication.v1.SelfSubjectReviewStatus": Message((
        message(1, "userInfo", "authentication.v1.UserInfo"),
    )),
    "authentication.v1.UserInfo": Message((
        string(1, "username"),
        string(2, "uid"),
        strings(3, "groups"),
        message_map(4, "extra", "authentication.v1.ExtraValue"),
    )),
    "authentication.v1.ExtraValue": Message((strings(1, "items", "always"),), _only("items")),
    # k8s.io/api/rbac/v1/generated.proto
    "rbac.v1.Role": Message((
        message(1, "metadata", OBJECT_META),
        messages(2, "rules", "rbac.v1.PolicyRule", "always"),
    )),
    "rbac.v1.ClusterRole": Message((
        message(1, "metadata", OBJECT_META),
        messages(2, "rules", "rbac.v1.PolicyRule", "always"),
        message(3, "aggregationRule", "rbac.v1.AggregationRule", "pointer"),
    )),
    "rbac.v1.AggregationRule": Message((
        messages(1, "clusterRoleSelectors", LABEL_SELECTOR),
    )),
    "rbac.v1.PolicyRule": Message((
        strings(1, "verbs", "always"),
        strings(2, "apiGroups"),
        strings(3, "resources"),
        strings(4, "resourceNames"),
        strings(5, "nonResourceURLs"),
    )),
    "rbac.v1.RoleBinding": Message((
        message(1, "metadata", OBJECT_META),
        messages(2, "subjects", "rbac.v1.Subject"),
        message(3, "roleRef", "rbac.v1.RoleRef"),
    )),
    "rbac.v1.Subject": Message((
        string(1, "kind", "always"),
        string(2, "apiGroup"),
        string(3, "name", "always"),
        string(4, "namespace"),
    )),
    "rbac.v1.RoleRef": Message((
        string(1, "apiGroup", "always"),
        string(2, "kind", "always"),
        string(3, "name", "always"),
    )),
}  # fmt: skip

# Options kinds are registered in every group version (metav1.AddToGroupVersion), so a
# DELETE body may say "v1", "apps/v1" or "meta.k8s.io/v1".
ANY_VERSION = "*"

HAND_KINDS: Mapping[tuple[str, str], str] = {
    ("v1", "ConfigMap"): "core.v1.ConfigMap",
    ("v1", "Secret"): "core.v1.Secret",
    ("v1", "Namespace"): "core.v1.Namespace",
    ("v1", "ServiceAccount"): "core.v1.ServiceAccount",
    ("policy/v1", "Eviction"): "policy.Eviction",
    ("policy/v1beta1", "Eviction"): "policy.Eviction",
    ("policy/v1", "PodDisruptionBudget"): "policy.v1.PodDisruptionBudget",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"):
        "authorization.v1.SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SubjectAccessReview"): "authorization.v1.SubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"):
        "authorization.v1.SelfSubjectRulesReview",
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"):
        "authorization.v1.SubjectAccessReview",
    ("authentication.k8s.io/v1", "TokenRequest"): "authentication.v1.TokenRequest",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "authentication.v1.SelfSubjectReview",
    ("authentication.k8s.io/v1beta1", "SelfSubjectReview"): "authentication.v1.SelfSubjectReview",
    ("authentication.k8s.io/v1alpha1", "SelfSubjectReview"):
        "authentication.v1.SelfSubjectReview",
    ("rbac.authorization.k8s.io/v1", "Role"): "rbac.v1.Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "rbac.v1.ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rbac.v1.RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "rbac.v1.RoleBinding",
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
