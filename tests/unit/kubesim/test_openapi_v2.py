"""kubesim's `/openapi/v2`: the Swagger document, its gnostic protobuf form, content negotiation.

The protobuf is read back here with field numbers written out from
github.com/google/gnostic-models openapiv2/OpenAPIv2.proto, independently of the encoder,
and then asked the questions kubectl 1.27/1.28 ask of it: `supportsQueryParam`
(k8s.io/cli-runtime pkg/resource/query_param_verifier.go) and `GetConsumes`
(k8s.io/kubectl pkg/util/openapi/openapi.go).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.openapi.v2 import (
    JSON_MEDIA_TYPE,
    PROTOBUF_DEPRECATED_MEDIA_TYPE,
    PROTOBUF_MEDIA_TYPE,
    negotiate,
    swagger_document,
)
from kubesim.apiserver.openapi.v2_protobuf import encode_document
from kubesim.apiserver.openapi.v3 import OpenApi, RawResponse
from kubesim.apiserver.protobuf.wire import iter_fields
from kubesim.apiserver.resources import ResourceRegistry, ResourceType

Obj = dict[str, Any]
GVK = tuple[str, str, str]

# --- reading the protobuf back, from OpenAPIv2.proto's field numbers ---


def _fields(data: bytes) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = defaultdict(list)
    for number, _, value in iter_fields(data):
        out[number].append(value)
    return out


def _text(value: bytes) -> str:
    return value.decode()


def _one(fields: dict[int, list[Any]], number: int) -> bytes:
    [value] = fields[number]
    assert isinstance(value, bytes)
    return value


def _extensions(fields: dict[int, list[Any]], number: int) -> Obj:
    """repeated NamedAny {name = 1; Any value = 2}; Any {yaml = 2}."""
    out: Obj = {}
    for named in fields.get(number, []):
        f = _fields(named)
        out[_text(_one(f, 1))] = json.loads(_text(_one(_fields(_one(f, 2)), 2)))
    return out


def _query_parameter(item: bytes) -> Obj:
    """ParametersItem.parameter(1) > Parameter.non_body_parameter(2) >
    NonBodyParameter.query_parameter_sub_schema(3)."""
    f = _fields(_one(_fields(_one(_fields(_one(_fields(item), 1)), 2)), 3))
    param: Obj = {"name": _text(_one(f, 4)), "in": _text(_one(f, 2)), "type": _text(_one(f, 6))}
    if f.get(20) == [1]:
        param["uniqueItems"] = True
    return param


def _operation(data: bytes) -> Obj:
    f = _fields(data)
    op: Obj = {"operationId": _text(_one(f, 5))}
    if 7 in f:
        op["consumes"] = [_text(c) for c in f[7]]
    op["parameters"] = [_query_parameter(p) for p in f[8]]
    responses: Obj = {}
    for named in _fields(_one(f, 9))[1]:  # Responses.response_code
        nf = _fields(named)
        response = _fields(_one(_fields(_one(nf, 2)), 1))  # ResponseValue.response
        responses[_text(_one(nf, 1))] = {"description": _text(_one(response, 1))}
    op["responses"] = responses
    return op | _extensions(f, 13)


_METHOD_NUMBERS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def _document(data: bytes) -> Obj:
    f = _fields(data)
    info = _fields(_one(f, 2))
    paths: Obj = {}
    for named in _fields(_one(f, 8))[2]:  # Paths.path
        nf = _fields(named)
        item = _fields(_one(nf, 2))
        paths[_text(_one(nf, 1))] = {
            method: _operation(_one(item, n)) for method, n in _METHOD_NUMBERS.items() if n in item
        }
    assert _one(f, 9) == b""  # Definitions present, and empty
    return {
        "swagger": _text(_one(f, 1)),
        "info": {"title": _text(_one(info, 1)), "version": _text(_one(info, 2))},
        "paths": paths,
        "definitions": {},
    }


def _patch_operations(data: bytes) -> list[dict[int, list[Any]]]:
    """Document.paths(8) > Paths.path(2) > NamedPathItem.value(2) > PathItem.patch(8)."""
    out = []
    for named in _fields(_one(_fields(data), 8))[2]:
        item = _fields(_one(_fields(named), 2))
        if 8 in item:
            out.append(_fields(_one(item, 8)))
    return out


def _has_gvk(op: dict[int, list[Any]], gvk: GVK) -> bool:
    value = _extensions(op, 13).get("x-kubernetes-group-version-kind")
    return value is not None and (value["group"], value["version"], value["kind"]) == gvk


def supports_query_param(data: bytes, gvk: GVK, param: str) -> bool:
    """query_param_verifier.go `supportsQueryParam`: the first PATCH of the GVK decides."""
    for op in _patch_operations(data):
        if _has_gvk(op, gvk):
            return any(_query_parameter(p)["name"] == param for p in op[8])
    raise LookupError("couldn't find GVK in openapi")


def get_consumes(data: bytes, gvk: GVK) -> list[str] | None:
    """pkg/util/openapi/openapi.go `GetConsumes(gvk, "PATCH")`."""
    for op in _patch_operations(data):
        if _has_gvk(op, gvk):
            return [_text(c) for c in op.get(7, [])]
    return None


# --- the document ---

REGISTRY = ResourceRegistry()
DOC = swagger_document(REGISTRY)
PROTOBUF = encode_document(DOC)


def test_the_protobuf_reads_back_as_the_json_document() -> None:
    assert _document(PROTOBUF) == DOC


@pytest.mark.parametrize("t", [t for t in REGISTRY.types if not t.virtual], ids=str)
def test_kubectls_v2_verifier_finds_field_validation(t: ResourceType) -> None:
    assert supports_query_param(PROTOBUF, (t.group, t.version, t.kind), "fieldValidation")


def test_an_unknown_kind_is_not_in_the_document() -> None:
    with pytest.raises(LookupError):
        supports_query_param(PROTOBUF, ("example.com", "v1", "Widget"), "fieldValidation")


def test_patch_consumes_what_kubesim_applies_and_no_model_is_published() -> None:
    assert get_consumes(PROTOBUF, ("apps", "v1", "Deployment")) == [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ]
    assert DOC["definitions"] == {}  # apply falls back to kubectl's built-in types


def test_core_kinds_carry_an_empty_group() -> None:
    op = DOC["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert op["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert DOC["paths"]["/api/v1/nodes/{name}"]["patch"]["operationId"] == "patchNode"


_names = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
_types = st.lists(
    st.builds(
        ResourceType,
        group=st.sampled_from(["", "apps", "example.com"]),
        version=st.sampled_from(["v1", "v1beta1"]),
        kind=_names.map(str.capitalize),
        plural=_names,
        namespaced=st.booleans(),
        virtual=st.booleans(),
    ),
    max_size=6,
    unique_by=lambda t: (t.group, t.version, t.plural),
)


@given(_types)
def test_any_registry_round_trips_and_every_stored_kind_is_verified(
    types: list[ResourceType],
) -> None:
    doc = swagger_document(ResourceRegistry(types))
    data = encode_document(doc)
    assert _document(data) == doc
    for t in types:
        gvk = (t.group, t.version, t.kind)
        if not t.virtual and gvk not in {(o.group, o.version, o.kind) for o in types if o != t}:
            assert supports_query_param(data, gvk, "fieldValidation")


@pytest.mark.parametrize(
    "doc",
    [
        DOC | {"host": "example.com"},
        DOC | {"definitions": {"io.k8s.api.apps.v1.Deployment": {"type": "object"}}},
        DOC | {"paths": {"/p": {"patch": {"parameters": [{"name": "body", "in": "body"}]}}}},
        DOC | {"paths": {"/p": {"trace": {}}}},
    ],
    ids=["unknown field", "a schema", "a body parameter", "an unknown method"],
)
def test_what_the_encoder_does_not_cover_is_refused_not_dropped(doc: Obj) -> None:
    with pytest.raises(ValueError, match=r"subset|schemas|query parameters"):
        encode_document(doc)


# --- content negotiation (kube-openapi pkg/handler/handler.go) ---


@pytest.mark.parametrize(
    ("accept", "served_as"),
    [
        ("", JSON_MEDIA_TYPE),
        ("*/*", JSON_MEDIA_TYPE),
        ("*", JSON_MEDIA_TYPE),
        ("application/*", JSON_MEDIA_TYPE),
        ("application/json", JSON_MEDIA_TYPE),
        ("application/json, */*", JSON_MEDIA_TYPE),  # kubectl get --raw
        (PROTOBUF_DEPRECATED_MEDIA_TYPE, PROTOBUF_MEDIA_TYPE),  # client-go's discovery client
        (PROTOBUF_MEDIA_TYPE, PROTOBUF_MEDIA_TYPE),
        (f"application/json;q=0.5, {PROTOBUF_MEDIA_TYPE}", PROTOBUF_MEDIA_TYPE),
        (f"*/*;q=0.1, {PROTOBUF_MEDIA_TYPE};q=0.9", PROTOBUF_MEDIA_TYPE),
        ("text/html, application/json ; q=0.2", JSON_MEDIA_TYPE),
        ("text/html", None),
        ("application/yaml", None),
        ("garbage", None),
    ],
)
def test_negotiate(accept: str, served_as: str | None) -> None:
    assert negotiate(accept) == served_as


def test_the_openapi_endpoint_answers_v2_by_accept_header() -> None:
    openapi = OpenApi(REGISTRY)
    assert openapi("/openapi/v2?timeout=32s", PROTOBUF_DEPRECATED_MEDIA_TYPE) == RawResponse(
        200, PROTOBUF, PROTOBUF_MEDIA_TYPE
    )
    assert openapi("/openapi/v2", "application/json") == DOC
    assert openapi("/openapi/v2", "text/html") == RawResponse(406)
    assert openapi("/openapi/v2/extra", "application/json") is None
