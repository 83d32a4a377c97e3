"""OpenAPI v3 component schemas of the kinds kubesim serves, for `kubectl explain`.

kubesim's type knowledge is the protobuf schema generated from the Go types
(`protobuf/generated.py`: every field's JSON name, scalar type, nested message, and whether
it is a list or a map), so the field tree, the types and the group-version-kind of every
built-in kind come from there; names follow kube-openapi's (`io.k8s.api.apps.v1.Deployment`),
so `kubectl explain` prints the same type names (`<DeploymentStrategy>`). What the Go types
do not say is left out: descriptions (only the common object fields carry kubesim's own),
enums, defaults, and `required` beyond the scalar, list and map fields Go always writes.

No patch metadata (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`) is
published and the PATCH operations declare no request body: kubectl then keeps computing
`kubectl apply`'s strategic merge patches from its built-in types (patcher.go falls back
when the operation lacks `application/strategic-merge-patch+json`), as it did before these
schemas existed. The schemas depend on the kinds alone, so they are built once per process.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from kubesim.apiserver.protobuf import generated
from kubesim.types import Obj

REF_PREFIX = "#/components/schemas/"
SCHEMAS_REVISION = 3  # in the documents' hashes: raise it when what is built here changes
SCALARS: dict[str, Obj] = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "int32": {"type": "integer", "format": "int32"},
    "int64": {"type": "integer", "format": "int64"},
    "bytes": {"type": "string", "format": "byte"},
    "double": {"type": "number", "format": "double"},
    "json": {"type": "object"},
}
# The messages with a JSON form of their own (protobuf/schema.py's hand-written ones).
SPECIAL: dict[str, tuple[str, Obj]] = {
    "meta.v1.Time": ("io.k8s.apimachinery.pkg.apis.meta.v1.Time",
                     {"type": "string", "format": "date-time",
                      "description": "Time is a wrapper around time.Time which supports correct "
                                     "marshaling to YAML and JSON."}),
    "meta.v1.MicroTime": ("io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
                          {"type": "string", "format": "date-time",
                           "description": "MicroTime is version of Time with microsecond level "
                                          "precision."}),
    "meta.v1.FieldsV1": ("io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
                         {"type": "object", "description": "FieldsV1 stores a set of fields in "
                          "a data structure like a Trie, in JSON format."}),
    "meta.v1.Duration": ("io.k8s.apimachinery.pkg.apis.meta.v1.Duration", {"type": "string"}),
    # No `type`, as kube-openapi writes them: explain prints their names.
    "resource.Quantity": ("io.k8s.apimachinery.pkg.api.resource.Quantity",
                          {"oneOf": [{"type": "string"}, {"type": "number"}],
                           "description": "Quantity is a fixed-point representation of a "
                                          "number (`100m`, `1Gi`, `2`)."}),
    "intstr.IntOrString": ("io.k8s.apimachinery.pkg.util.intstr.IntOrString",
                           {"oneOf": [{"type": "integer"}, {"type": "string"}],
                            "format": "int-or-string",
                            "description": "IntOrString is a type that can hold an int32 or a "
                                           "string."}),
    "runtime.RawExtension": ("io.k8s.apimachinery.pkg.runtime.RawExtension",
                             {"type": "object", "description": "RawExtension is an object of "
                              "any kind, embedded as JSON."}),
}  # fmt: skip
# kubesim's own words for the fields every object has.
COMMON_DESCRIPTIONS = {
    "apiVersion": "APIVersion defines the versioned schema of this representation of an "
                  "object: the group and version the server serves it as.",
    "kind": "Kind is a string value representing the REST resource this object represents, "
            "in CamelCase.",
    "metadata": "Standard object's metadata: name, namespace, labels, annotations, owners, "
                "finalizers and what the server sets (uid, resourceVersion, timestamps).",
    "spec": "The desired state, as its writer declares it.",
    "status": "The observed state, as the controllers and kubelets acting on it write it.",
}  # fmt: skip


def schema_name(message: str) -> str:
    """kube-openapi's definition name for a protobuf message name."""
    if message in SPECIAL:
        return SPECIAL[message][0]
    group_version, _, name = message.rpartition(".")
    if group_version.startswith("meta."):
        return f"io.k8s.apimachinery.pkg.apis.{group_version}.{name}"
    if group_version.startswith("apiextensions."):
        return f"io.k8s.apiextensions-apiserver.pkg.apis.{group_version}.{name}"
    return f"io.k8s.api.{group_version}.{name}"


def _field_schema(kind: str, of: str, label: str) -> Obj:
    item = {"$ref": REF_PREFIX + schema_name(of)} if kind == "message" else dict(SCALARS.get(
        kind, {"type": "string"}))  # fmt: skip
    if label == "repeated":
        return {"type": "array", "items": item}
    if label == "map":
        return {"type": "object", "additionalProperties": item}
    return item


def _message_schema(message: str, pending: list[str]) -> Obj:
    if message in SPECIAL:
        return dict(SPECIAL[message][1])
    properties: Obj = {}
    required: list[str] = []
    for _number, json_name, kind, of, label, presence in generated.MESSAGES.get(message, ()):
        schema = _field_schema(kind, of, label)
        if json_name in COMMON_DESCRIPTIONS:
            schema = {**schema, "description": COMMON_DESCRIPTIONS[json_name]}
        properties[json_name] = schema
        if kind == "message":
            pending.append(of)
        single_message = kind == "message" and label == "optional"
        if presence == "always" and not single_message and json_name not in ("apiVersion", "kind"):
            required.append(json_name)
    out: Obj = {"type": "object", "properties": properties}
    if required:
        out["required"] = sorted(required)
    return out


def _gvk(api_version: str, kind: str) -> Obj:
    group, _, version = api_version.rpartition("/")
    return {"group": group, "version": version, "kind": kind}


@functools.cache
def component_schemas(kinds: tuple[tuple[str, str], ...]) -> Obj:
    """The schemas of these (apiVersion, kind)s and of every message they reach."""
    schemas: Obj = {}
    pending: list[str] = []
    for api_version, kind in kinds:
        message = generated.KINDS.get((api_version, kind))
        if message is None:  # a kind without generated messages: its envelope only
            name = f"io.k8s.kubesim.{api_version.replace('/', '.')}.{kind}"
            schemas[name] = {
                "type": "object",
                "properties": {key: {"type": "object" if key == "metadata" else "string",
                                     "description": text}
                               for key, text in COMMON_DESCRIPTIONS.items()
                               if key in ("apiVersion", "kind", "metadata")},
                "x-kubernetes-group-version-kind": [_gvk(api_version, kind)],
            }  # fmt: skip
            continue
        schema = _message_schema(message, pending)
        # TypeMeta is no protobuf field: the kind's two strings, first as kube-openapi has them.
        type_meta = {key: {"type": "string", "description": COMMON_DESCRIPTIONS[key]}
                     for key in ("apiVersion", "kind")}  # fmt: skip
        schema["properties"] = {**type_meta, **schema["properties"]}
        schema["x-kubernetes-group-version-kind"] = [_gvk(api_version, kind)]
        schemas[schema_name(message)] = schema
    while pending:
        message = pending.pop()
        name = schema_name(message)
        if name not in schemas:
            schemas[name] = _message_schema(message, pending)
    for name, schema in schemas.items():
        # A property holding a message: the $ref in an allOf, with its own description
        # beside it, as kube-openapi writes v3 (a $ref's siblings are ignored in 3.0).
        for key, prop in list((schema.get("properties") or {}).items()):
            if "$ref" in prop and "description" in prop:
                schema["properties"][key] = {"allOf": [{"$ref": prop["$ref"]}],
                                             "description": prop["description"]}  # fmt: skip
        schemas[name] = schema
    return dict(sorted(schemas.items()))


def kinds_of(api_versions_and_kinds: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(set(api_versions_and_kinds)))
