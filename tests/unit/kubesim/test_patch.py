"""Tests for kubesim.apiserver.patching: JSON patch, JSON merge patch, strategic merge patch.

Expected behaviour comes from upstream: evanphx/json-patch v4 (what the API server links),
k8s.io/apimachinery/pkg/util/strategicpatch (patch.go and its patch_test.go fixtures) and
staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go for status codes.
"""

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.apiserver.patching.apply import (
    GENERIC_422_MESSAGE,
    PATCH_STRATEGIES,
    Json,
    JsonObject,
    PatchBadRequest,
    PatchError,
    PatchInternalError,
    PatchInvalid,
    PatchKind,
    PatchRequestEntityTooLarge,
    PatchUnsupportedMediaType,
    apply_json_patch,
    apply_merge_patch,
    apply_patch,
    apply_strategic_merge_patch,
    content_type_to_patch_kind,
    decode_patch_body,
    schema_for_kind,
    strategic_merge,
    supports_strategic_merge,
)
from kubesim.apiserver.patching.gofmt_values import go_sprint
from kubesim.apiserver.patching.schema import (
    EMPTY_SCHEMA,
    PatchSchema,
    SchemaField,
    parse_strategies,
)

ALL_TYPES = (
    "application/json-patch+json, application/merge-patch+json, "
    "application/strategic-merge-patch+json, application/apply-patch+yaml"
)


def _deployment() -> JsonObject:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "core"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:v1",
                            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "env": [{"name": "B", "value": "2"}, {"name": "C", "value": "3"}],
                        },
                        {"name": "sidecar", "image": "proxy:v1"},
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "a", "operator": "Exists"}],
                },
            },
        },
    }


def _at(value: Any, *path: str | int) -> Any:
    """``value[path[0]][path[1]]...``, untyped: tests read into JSON they just built."""
    for step in path:
        value = value[step]
    return value


def _template_spec(obj: JsonObject) -> Any:
    return _at(obj, "spec", "template", "spec")


# --- Content types ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "kind"),
    [
        ("application/json-patch+json", PatchKind.JSON),
        ("application/merge-patch+json", PatchKind.MERGE),
        ("application/strategic-merge-patch+json", PatchKind.STRATEGIC),
        ("application/merge-patch+json; charset=utf-8", PatchKind.MERGE),
        ("application/json-patch+json;charset=UTF-8", PatchKind.JSON),
    ],
)
def test_content_type_to_patch_kind(content_type: str, kind: PatchKind) -> None:
    assert content_type_to_patch_kind(content_type) is kind


@pytest.mark.parametrize(
    "content_type",
    [
        # server-side apply is the API server's (managed_fields.py), never a patch's
        "application/apply-patch+yaml",
        "application/json",
        "Application/JSON-Patch+JSON",  # upstream compares exactly
        "application/merge-patch+json ; charset=utf-8",  # the space stays, as upstream
        ";application/merge-patch+json",
        "",
    ],
)
def test_unsupported_content_types_are_415_listing_accepted_types(content_type: str) -> None:
    with pytest.raises(PatchUnsupportedMediaType) as raised:
        content_type_to_patch_kind(content_type)
    assert raised.value.code == 415
    assert raised.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the body of the request was in an unknown format - "
        f"accepted media types include: {ALL_TYPES}",
        "reason": "UnsupportedMediaType",
        "code": 415,
    }


def test_strategic_merge_is_415_when_the_kind_has_no_strategic_metadata() -> None:
    with pytest.raises(PatchUnsupportedMediaType) as raised:
        content_type_to_patch_kind("application/strategic-merge-patch+json", strategic_merge=False)
    assert raised.value.accepted == (
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    )


# --- Decoding bodies ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "body", "message"),
    [
        (
            PatchKind.JSON,
            b"invalid json patch",
            "invalid character 'i' looking for beginning of value",
        ),
        (PatchKind.STRATEGIC, b"{", "unexpected end of JSON input"),
        (PatchKind.STRATEGIC, b"", "unexpected end of JSON input"),
        (PatchKind.JSON, b"[] x", "invalid character 'x' after top-level value"),
        (PatchKind.MERGE, b"{nope", "Invalid JSON Patch"),
        (PatchKind.MERGE, b"", "Invalid JSON Patch"),
    ],
)
def test_malformed_bodies_are_400(kind: PatchKind, body: bytes, message: str) -> None:
    with pytest.raises(PatchBadRequest) as raised:
        decode_patch_body(kind, body)
    assert raised.value.code == 400
    assert raised.value.message == message
    assert raised.value.status()["reason"] == "BadRequest"


def test_decode_patch_body_returns_json() -> None:
    body = b'{"metadata":{"labels":{"a":"\xc3\xa9"}}}'
    assert decode_patch_body(PatchKind.MERGE, body) == {"metadata": {"labels": {"a": "é"}}}


# --- JSON patch (RFC 6902, evanphx/json-patch v4) -----------------------------------------

_DOC: JsonObject = {
    "metadata": {
        "name": "p",
        "annotations": {"a": "1", "kubectl.kubernetes.io/restartedAt": "t0", "x~y": "tilde"},
        "labels": None,
    },
    "list": [1, 2, 3],
    "objs": [{"name": "a"}, {"name": "b"}],
}


def _with(changes: dict[str, Json]) -> JsonObject:
    doc = copy.deepcopy(_DOC)
    doc.update(changes)
    return doc


_DROP = "<dropped>"


def _edited(mapping: JsonObject, changes: dict[str, Json]) -> None:
    for key, value in changes.items():
        if value == _DROP:
            del mapping[key]
        else:
            mapping[key] = value


def _meta(**changes: Json) -> JsonObject:
    doc = _with({})
    _edited(_at(doc, "metadata"), changes)
    return doc


def _annotations(**changes: Json) -> JsonObject:
    doc = _with({})
    _edited(_at(doc, "metadata", "annotations"), changes)
    return doc


JSON_PATCH_CASES: list[tuple[str, list[Json], JsonObject]] = [
    (
        "add member",
        [{"op": "add", "path": "/new", "value": {"k": "v"}}],
        _with({"new": {"k": "v"}}),
    ),
    (
        "add replaces an existing member",
        [{"op": "add", "path": "/list", "value": []}],
        _with({"list": []}),
    ),
    ("add without value adds null", [{"op": "add", "path": "/n"}], _with({"n": None})),
    (
        "add into array",
        [{"op": "add", "path": "/list/1", "value": 9}],
        _with({"list": [1, 9, 2, 3]}),
    ),
    (
        "add at array end index",
        [{"op": "add", "path": "/list/3", "value": 9}],
        _with({"list": [1, 2, 3, 9]}),
    ),
    (
        "add appends with -",
        [{"op": "add", "path": "/list/-", "value": 9}],
        _with({"list": [1, 2, 3, 9]}),
    ),
    (
        "add negative index -1 appends",
        [{"op": "add", "path": "/list/-1", "value": 9}],
        _with({"list": [1, 2, 3, 9]}),
    ),
    (
        "add negative index inserts",
        [{"op": "add", "path": "/list/-4", "value": 9}],
        _with({"list": [9, 1, 2, 3]}),
    ),
    (
        "atoi accepts +1",
        [{"op": "add", "path": "/list/+1", "value": 9}],
        _with({"list": [1, 9, 2, 3]}),
    ),
    (
        "atoi accepts leading zero",
        [{"op": "add", "path": "/list/01", "value": 9}],
        _with({"list": [1, 9, 2, 3]}),
    ),
    (
        "~1 escapes a slash (rollout restart annotation)",
        [
            {
                "op": "replace",
                "path": "/metadata/annotations/kubectl.kubernetes.io~1restartedAt",
                "value": "t1",
            }
        ],
        _annotations(**{"kubectl.kubernetes.io/restartedAt": "t1"}),
    ),
    (
        "~0 escapes a tilde",
        [{"op": "remove", "path": "/metadata/annotations/x~0y"}],
        _annotations(**{"x~y": _DROP}),
    ),
    ("~01 decodes to ~1", [{"op": "add", "path": "/a~01", "value": 1}], _with({"a~1": 1})),
    ("remove member", [{"op": "remove", "path": "/metadata/annotations/a"}], _annotations(a=_DROP)),
    ("remove null member", [{"op": "remove", "path": "/metadata/labels"}], _meta(labels=_DROP)),
    ("remove array element", [{"op": "remove", "path": "/list/0"}], _with({"list": [2, 3]})),
    ("remove negative index", [{"op": "remove", "path": "/list/-1"}], _with({"list": [1, 2]})),
    (
        "replace member",
        [{"op": "replace", "path": "/metadata/name", "value": "q"}],
        _meta(name="q"),
    ),
    (
        "replace array element",
        [{"op": "replace", "path": "/objs/1/name", "value": "c"}],
        _with({"objs": [{"name": "a"}, {"name": "c"}]}),
    ),
    # evanphx v4 only checks array indices: replacing a missing member adds it.
    (
        "replace of a missing member adds it",
        [{"op": "replace", "path": "/extra", "value": 1}],
        _with({"extra": 1}),
    ),
    ("replace whole document", [{"op": "replace", "path": "", "value": {"a": 1}}], {"a": 1}),
    (
        "replace whole document with a scalar is a no-op",
        [{"op": "replace", "path": "", "value": 5}],
        _with({}),
    ),
    (
        "move member",
        [{"op": "move", "from": "/metadata/name", "path": "/name"}],
        {**_meta(name=_DROP), "name": "p"},
    ),
    (
        "move array element",
        [{"op": "move", "from": "/list/0", "path": "/list/-"}],
        _with({"list": [2, 3, 1]}),
    ),
    (
        "copy member",
        [{"op": "copy", "from": "/objs/0", "path": "/first"}],
        _with({"first": {"name": "a"}}),
    ),
    (
        "copy of a missing member copies null",
        [{"op": "copy", "from": "/nope", "path": "/n"}],
        _with({"n": None}),
    ),
    (
        "test passes on equal values",
        [
            {"op": "test", "path": "/metadata/annotations/a", "value": "1"},
            {"op": "test", "path": "/objs", "value": [{"name": "a"}, {"name": "b"}]},
            {"op": "test", "path": "/list/-1", "value": 3},
            {"op": "test", "path": "/metadata/labels", "value": None},
            {"op": "test", "path": "/metadata/missing", "value": None},
        ],
        _with({}),
    ),
    ("test of the whole document", [{"op": "test", "path": "", "value": _DOC}], _with({})),
    # evanphx splits on "/" and skips the first segment, whatever it is.
    (
        "a path without a leading slash loses its first segment",
        [{"op": "add", "path": "lost/plain", "value": 1}],
        _with({"plain": 1}),
    ),
    (
        "operations see earlier results",
        [
            {"op": "add", "path": "/spec", "value": {}},
            {"op": "add", "path": "/spec/items", "value": []},
            {"op": "add", "path": "/spec/items/0", "value": {"k": 1}},
            {"op": "replace", "path": "/spec/items/0/k", "value": 2},
        ],
        _with({"spec": {"items": [{"k": 2}]}}),
    ),
    ("null patch is no operation", [], _with({})),
]


@pytest.mark.parametrize(
    ("operations", "expected"),
    [pytest.param(ops, expected, id=name) for name, ops, expected in JSON_PATCH_CASES],
)
def test_json_patch(operations: list[Json], expected: JsonObject) -> None:
    before = copy.deepcopy(_DOC)
    assert apply_json_patch(_DOC, operations) == expected
    assert before == _DOC


def test_json_patch_null_body_is_a_no_op() -> None:
    assert apply_json_patch(_DOC, None) == _DOC


def test_json_patch_result_does_not_alias_the_patch() -> None:
    value: JsonObject = {"k": []}
    result = apply_json_patch({}, [{"op": "add", "path": "/v", "value": value}])
    assert isinstance(result, dict)
    _at(result, "v", "k").append(1)
    assert value == {"k": []}


JSON_PATCH_FAILURES: list[tuple[str, Json, str]] = [
    (
        "failed test (the reconciler's guard)",
        {"op": "test", "path": "/metadata/annotations/a", "value": "2"},
        "testing value /metadata/annotations/a failed: test failed",
    ),
    (
        "test type mismatch 1 vs 1.0",
        {"op": "test", "path": "/list/0", "value": 1.0},
        "testing value /list/0 failed: test failed",
    ),
    (
        "test object with extra member",
        {"op": "test", "path": "/objs/0", "value": {"name": "a", "x": 1}},
        "testing value /objs/0 failed: test failed",
    ),
    (
        "test non-null on missing member",
        {"op": "test", "path": "/metadata/missing", "value": "x"},
        "testing value /metadata/missing failed: test failed",
    ),
    (
        "test without value",
        {"op": "test", "path": "/metadata/name"},
        "testing value /metadata/name failed: test failed",
    ),
    (
        "test missing parent",
        {"op": "test", "path": "/spec/x", "value": 1},
        "test operation does not apply: is missing path: /spec/x: missing value",
    ),
    (
        "test index out of range",
        {"op": "test", "path": "/list/3", "value": 1},
        "error in test for path: '/list/3': Unable to access invalid index: 3: "
        "invalid index referenced",
    ),
    (
        "remove missing member",
        {"op": "remove", "path": "/metadata/annotations/zz"},
        "error in remove for path: '/metadata/annotations/zz': Unable to remove nonexistent key: "
        "zz: missing value",
    ),
    (
        "remove missing parent",
        {"op": "remove", "path": "/spec/x"},
        'remove operation does not apply: doc is missing path: "/spec/x": missing value',
    ),
    (
        "remove index out of range",
        {"op": "remove", "path": "/list/3"},
        "error in remove for path: '/list/3': Unable to access invalid index: 3: "
        "invalid index referenced",
    ),
    (
        "remove negative index out of range",
        {"op": "remove", "path": "/list/-4"},
        "error in remove for path: '/list/-4': Unable to access invalid index: -4: "
        "invalid index referenced",
    ),
    (
        "remove with -",
        {"op": "remove", "path": "/list/-"},
        "error in remove for path: '/list/-': strconv.Atoi: parsing \"-\": invalid syntax",
    ),
    (
        "remove whole document",
        {"op": "remove", "path": ""},
        'remove operation does not apply: doc is missing path: "": missing value',
    ),
    (
        "add to a one-segment path without a slash",
        {"op": "add", "path": "plain", "value": 1},
        'add operation does not apply: doc is missing path: "plain": missing value',
    ),
    (
        "add missing parent",
        {"op": "add", "path": "/spec/template/x", "value": 1},
        'add operation does not apply: doc is missing path: "/spec/template/x": missing value',
    ),
    (
        "add through a scalar",
        {"op": "add", "path": "/metadata/name/x", "value": 1},
        'add operation does not apply: doc is missing path: "/metadata/name/x": missing value',
    ),
    (
        "add through a null",
        {"op": "add", "path": "/metadata/labels/x", "value": 1},
        'add operation does not apply: doc is missing path: "/metadata/labels/x": missing value',
    ),
    (
        "add index past the end",
        {"op": "add", "path": "/list/4", "value": 1},
        "error in add for path: '/list/4': Unable to access invalid index: 4: "
        "invalid index referenced",
    ),
    (
        "add non-numeric index",
        {"op": "add", "path": "/list/x", "value": 1},
        "error in add for path: '/list/x': value was not a proper array index: 'x': strconv.Atoi: "
        'parsing "x": invalid syntax',
    ),
    (
        "add index out of int64",
        {"op": "add", "path": "/list/99999999999999999999", "value": 1},
        "error in add for path: '/list/99999999999999999999': value was not a proper array index: "
        "'99999999999999999999': strconv.Atoi: "
        'parsing "99999999999999999999": value out of range',
    ),
    (
        "replace index out of range",
        {"op": "replace", "path": "/list/9", "value": 1},
        "replace operation does not apply: doc is missing key: /list/9: missing value",
    ),
    (
        "replace missing parent",
        {"op": "replace", "path": "/a/b", "value": 1},
        "replace operation does not apply: doc is missing path: /a/b: missing value",
    ),
    (
        "move missing member",
        {"op": "move", "from": "/metadata/zz", "path": "/zz"},
        "error in move for path: 'zz': Unable to remove nonexistent key: zz: missing value",
    ),
    (
        "move into its own child",
        {"op": "move", "from": "/objs", "path": "/objs/0"},
        "move operation does not apply: doc is missing destination path: /objs/0: missing value",
    ),
    (
        "move without from",
        {"op": "move", "path": "/x"},
        "move operation failed to decode from: operation, missing from field: missing value",
    ),
    (
        "copy missing destination parent",
        {"op": "copy", "from": "/list", "path": "/a/b"},
        "copy operation does not apply: doc is missing destination path: /a/b: missing value",
    ),
    (
        "copy bad index",
        {"op": "copy", "from": "/list/7", "path": "/x"},
        "error in copy for from: '/list/7': Unable to access invalid index: 7: "
        "invalid index referenced",
    ),
    (
        "add without path",
        {"op": "add", "value": 1},
        "add operation failed to decode path: missing value",
    ),
    (
        "replace without path",
        {"op": "replace", "value": 1},
        "replace operation failed to decode path: operation missing path field: missing value",
    ),
    (
        "path not a string",
        {"op": "test", "path": 5, "value": 1},
        "test operation failed to decode path: json: "
        "cannot unmarshal number into Go value of type string",
    ),
    ("unknown op", {"op": "frobnicate", "path": "/x"}, "Unexpected kind: frobnicate"),
    ("missing op", {"path": "/x"}, "Unexpected kind: unknown"),
    ("null operation", None, "Unexpected kind: unknown"),
]


@pytest.mark.parametrize(
    ("operation", "detail"),
    [pytest.param(op, detail, id=name) for name, op, detail in JSON_PATCH_FAILURES],
)
def test_json_patch_failures_are_422_with_evanphx_detail(operation: Json, detail: str) -> None:
    with pytest.raises(PatchInvalid) as raised:
        apply_json_patch(_DOC, [operation])
    error = raised.value
    assert (error.code, error.detail) == (422, detail)
    # NewGenericServerResponse(422, ...) keeps neither the library text nor any cause.
    assert error.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": GENERIC_422_MESSAGE,
        "reason": "Invalid",
        "details": {},
        "code": 422,
    }


def test_json_patch_is_all_or_nothing() -> None:
    operations: list[Json] = [
        {"op": "add", "path": "/new", "value": 1},
        {"op": "test", "path": "/metadata/name", "value": "other"},
    ]
    before = copy.deepcopy(_DOC)
    with pytest.raises(PatchInvalid):
        apply_json_patch(_DOC, operations)
    assert before == _DOC


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"op": "add"}, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        ("[]", "json: cannot unmarshal string into Go value of type jsonpatch.Patch"),
        (
            [{"op": "add", "path": "/a"}, 3],
            "json: cannot unmarshal number into Go value of type jsonpatch.Operation",
        ),
        ([[]], "json: cannot unmarshal array into Go value of type jsonpatch.Operation"),
    ],
)
def test_json_patch_that_is_not_an_array_of_objects_is_400(patch: Json, message: str) -> None:
    with pytest.raises(PatchBadRequest) as raised:
        apply_json_patch(_DOC, patch)
    assert raised.value.message == message


def test_json_patch_with_too_many_operations_is_413() -> None:
    operations: list[Json] = [{"op": "test", "path": "/list/0", "value": 1}] * 10001
    with pytest.raises(PatchRequestEntityTooLarge) as raised:
        apply_json_patch(_DOC, operations)
    assert raised.value.status()["message"] == (
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, "
        "got 10001"
    )
    assert apply_json_patch(_DOC, operations[:10000]) == _DOC


def test_json_patch_whole_document_replace_without_value_is_500() -> None:
    with pytest.raises(PatchInternalError):
        apply_json_patch(_DOC, [{"op": "replace", "path": ""}])


# --- JSON merge patch (RFC 7386, evanphx/json-patch v4 MergePatch) ------------------------

# RFC 7386 appendix A, plus the two places where evanphx (and so the API server) differs.
MERGE_PATCH_CASES: list[tuple[Json, Json, Json]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    # evanphx: a null already in the document counts as absent.
    ({"a": None}, {"a": {"b": None, "c": 1}}, {"a": {"c": 1}}),
    # evanphx: nulls inside new arrays stay; nulls in objects inside them are pruned...
    ({}, {"a": [None, {"b": None, "c": 1}]}, {"a": [None, {"c": 1}]}),
    # ...except when an object is replaced by an array, which is taken verbatim.
    ({"a": {"x": 1}}, {"a": [{"b": None}]}, {"a": [{"b": None}]}),
]


@pytest.mark.parametrize(("doc", "patch", "expected"), MERGE_PATCH_CASES)
def test_merge_patch(doc: Json, patch: Json, expected: Json) -> None:
    before = copy.deepcopy((doc, patch))
    assert apply_merge_patch(doc, patch) == expected
    assert before == (doc, patch)


@pytest.mark.parametrize("patch", [None, "bar", 5, True])
def test_merge_patch_with_a_scalar_body_is_400(patch: Json) -> None:
    # RFC 7386 would return the patch; evanphx answers ErrBadJSONPatch.
    with pytest.raises(PatchBadRequest) as raised:
        apply_merge_patch({"a": "foo"}, patch)
    assert raised.value.message == "Invalid JSON Patch"


@pytest.mark.parametrize(
    ("patch", "expected_metadata"),
    [
        # kubectl annotate team=sre --overwrite
        ({"metadata": {"annotations": {"team": "sre"}}}, {"annotations": {"team": "sre"}}),
        # kubectl annotate team-
        ({"metadata": {"annotations": {"team": None}}}, {"annotations": {}}),
        # kubectl label tier=web (no labels yet)
        (
            {"metadata": {"labels": {"tier": "web"}}},
            {"annotations": {"team": "core"}, "labels": {"tier": "web"}},
        ),
        # kubectl label tier=web --resource-version=42
        (
            {"metadata": {"labels": {"tier": "web"}, "resourceVersion": "42"}},
            {"annotations": {"team": "core"}, "labels": {"tier": "web"}, "resourceVersion": "42"},
        ),
    ],
)
def test_kubectl_annotate_and_label_merge_patches(
    patch: JsonObject, expected_metadata: JsonObject
) -> None:
    result = apply_patch(PatchKind.MERGE, _deployment(), patch, "Deployment")
    assert result["metadata"] == {"name": "web", "namespace": "default", **expected_metadata}
    assert result["spec"] == _deployment()["spec"]


def test_merge_patch_replaces_lists_whole() -> None:
    patch: JsonObject = {"spec": {"template": {"spec": {"containers": [{"name": "app"}]}}}}
    result = apply_patch(PatchKind.MERGE, _deployment(), patch, "Deployment")
    assert _template_spec(result)["containers"] == [{"name": "app"}]


# --- Strategic merge patch: upstream fixtures ---------------------------------------------


def _merge_item_schema() -> PatchSchema:
    """Upstream's test struct MergeItem (and RetainKeysMergeItem), tag for tag."""
    item = PatchSchema("MergeItem")
    retain = PatchSchema("RetainKeysMergeItem")
    merge_by_name = SchemaField(("merge",), "name", item)
    item.fields = {
        "mergingList": merge_by_name,
        "nonMergingList": SchemaField((), "", item),
        "mergingIntList": SchemaField(("merge",), "", EMPTY_SCHEMA),
        "nonMergingIntList": SchemaField((), "", EMPTY_SCHEMA),
        "mergeItemPtr": merge_by_name,
        "simpleMap": SchemaField((), "", EMPTY_SCHEMA),
        "replacingItem": SchemaField(("replace",), "", EMPTY_SCHEMA),
        "retainKeysMap": SchemaField(("retainKeys",), "", retain),
        "retainKeysMergingList": SchemaField(("merge", "retainKeys"), "name", item),
    }
    retain.fields = {
        "simpleMap": SchemaField((), "", EMPTY_SCHEMA),
        "mergingIntList": SchemaField(("merge",), "", EMPTY_SCHEMA),
        "mergingList": merge_by_name,
        "nonMergingList": SchemaField((), "", item),
    }
    return item


MERGE_ITEM = _merge_item_schema()
_UPSTREAM_CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "strategic_merge_upstream_cases.yaml").read_text()
)["cases"]


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c["description"]) for c in _UPSTREAM_CASES if "error" not in c]
)
def test_strategic_merge_upstream_fixture(case: dict[str, Any]) -> None:
    original, patch = case["original"], case["patch"]
    before = copy.deepcopy((original, patch))
    result = strategic_merge(original, patch, MERGE_ITEM)
    # json.dumps keeps list order, so this compares order exactly.
    assert json.dumps(result, sort_keys=True) == json.dumps(case["result"], sort_keys=True)
    assert before == (original, patch)


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c["description"]) for c in _UPSTREAM_CASES if "error" in c]
)
def test_strategic_merge_upstream_fixture_errors(case: dict[str, Any]) -> None:
    with pytest.raises(PatchError) as raised:
        strategic_merge(case["original"], case["patch"], MERGE_ITEM)
    assert case["error"] in raised.value.message
    assert raised.value.code == case["code"]


def test_upstream_fixture_count() -> None:
    assert len(_UPSTREAM_CASES) >= 30


# --- Strategic merge patch: the tag table -------------------------------------------------


def _tag(kind: str, path: str) -> tuple[tuple[str, ...], str]:
    schema = schema_for_kind(kind)
    *parents, leaf = path.split(".")
    for part in parents:
        schema = schema.lookup(part).schema
    field = schema.lookup(leaf)
    return field.strategies, field.merge_key


POD_TEMPLATE_KINDS = ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"]


@pytest.mark.parametrize(
    ("kind", "path", "strategies", "merge_key"),
    [
        ("Pod", "metadata.ownerReferences", ("merge",), "uid"),
        ("Pod", "metadata.finalizers", ("merge",), ""),
        ("Pod", "spec.containers", ("merge",), "name"),
        ("Pod", "spec.initContainers", ("merge",), "name"),
        ("Pod", "spec.ephemeralContainers", ("merge",), "name"),
        ("Pod", "spec.containers.env", ("merge",), "name"),
        ("Pod", "spec.containers.ports", ("merge",), "containerPort"),
        ("Pod", "spec.containers.volumeMounts", ("merge",), "mountPath"),
        ("Pod", "spec.containers.volumeDevices", ("merge",), "devicePath"),
        ("Pod", "spec.initContainers.env", ("merge",), "name"),
        ("Pod", "spec.volumes", ("merge", "retainKeys"), "name"),
        ("Pod", "spec.imagePullSecrets", ("merge",), "name"),
        ("Pod", "spec.hostAliases", ("merge",), "ip"),
        ("Pod", "spec.topologySpreadConstraints", ("merge",), "topologyKey"),
        ("Pod", "spec.schedulingGates", ("merge",), "name"),
        ("Pod", "spec.resourceClaims", ("merge", "retainKeys"), "name"),
        ("Pod", "status.conditions", ("merge",), "type"),
        ("Pod", "status.podIPs", ("merge",), "ip"),
        ("Pod", "status.hostIPs", ("merge",), "ip"),
        *[(k, "spec.template.spec.containers.env", ("merge",), "name") for k in POD_TEMPLATE_KINDS],
        *[(k, "spec.template.metadata.finalizers", ("merge",), "") for k in POD_TEMPLATE_KINDS],
        *[(k, "status.conditions", ("merge",), "type") for k in POD_TEMPLATE_KINDS],
        ("Deployment", "spec.strategy", ("retainKeys",), ""),
        ("Node", "spec.podCIDRs", ("merge",), ""),
        ("Node", "status.conditions", ("merge",), "type"),
        ("Node", "status.addresses", ("merge",), "type"),
        ("Namespace", "status.conditions", ("merge",), "type"),
        ("Service", "spec.ports", ("merge",), "port"),
        ("ServiceAccount", "secrets", ("merge",), "name"),
        ("PodDisruptionBudget", "spec.selector", ("replace",), ""),
        ("PodDisruptionBudget", "status.conditions", ("merge",), "type"),
        ("ValidatingWebhookConfiguration", "webhooks", ("merge",), "name"),
        ("ValidatingWebhookConfiguration", "webhooks.matchConditions", ("merge",), "name"),
        *[
            (k, "metadata.ownerReferences", ("merge",), "uid")
            for k in ("ConfigMap", "Secret", "Event", "Lease", "Role", "ClusterRoleBinding")
        ],
    ],
)
def test_strategy_table_matches_upstream_tags(
    kind: str, path: str, strategies: tuple[str, ...], merge_key: str
) -> None:
    assert _tag(kind, path) == (strategies, merge_key)


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        # core/v1 NodeSpec.Taints: `json:"taints,omitempty" protobuf:"bytes,5,opt,name=taints"`
        ("Node", "spec.taints"),
        # core/v1 PodSpec.Tolerations: `json:"tolerations,omitempty" protobuf:"bytes,22,..."`
        ("Pod", "spec.tolerations"),
        ("Deployment", "spec.template.spec.tolerations"),
        # core/v1 PodStatus.ContainerStatuses has no patchStrategy either.
        ("Pod", "status.containerStatuses"),
        ("Pod", "spec.readinessGates"),
        ("Pod", "spec.containers.envFrom"),
        ("Node", "status.images"),
        ("Namespace", "spec.finalizers"),
        ("ServiceAccount", "imagePullSecrets"),
        ("Role", "rules"),
        ("ClusterRoleBinding", "subjects"),
        ("StatefulSet", "spec.volumeClaimTemplates"),
        ("Service", "status.loadBalancer.ingress"),
    ],
)
def test_lists_without_a_patch_strategy_upstream_are_atomic(kind: str, path: str) -> None:
    assert _tag(kind, path) == ((), "")


def test_workload_pod_templates_share_the_pod_tags() -> None:
    pod = {p: t for p, t in PATCH_STRATEGIES["Pod"].items() if p.startswith("spec.")}
    for kind in POD_TEMPLATE_KINDS:
        template = {
            p.removeprefix("spec.template."): t
            for p, t in PATCH_STRATEGIES[kind].items()
            if p.startswith("spec.template.spec.")
        }
        assert template == pod


@pytest.mark.parametrize("tag", ["merge,replace", "bogus", "merge,retainKeys,replace"])
def test_invalid_strategy_tags_are_rejected(tag: str) -> None:
    with pytest.raises(ValueError, match="unexpected patch strategy"):
        parse_strategies(tag)


def test_every_served_kind_builds_a_schema() -> None:
    for kind in PATCH_STRATEGIES:
        assert supports_strategic_merge(kind)
        assert schema_for_kind(kind).name == kind
    assert not supports_strategic_merge("Widget")


# --- Strategic merge patch: what kubectl and the kubelet send ----------------------------


def _smp(patch: Json, doc: JsonObject | None = None, kind: str = "Deployment") -> JsonObject:
    return apply_strategic_merge_patch(_deployment() if doc is None else doc, patch, kind)


def test_kubectl_apply_changes_image_and_adds_env() -> None:
    # Second `kubectl apply` after editing the image and adding env A: CreateThreeWayMergePatch.
    patch: JsonObject = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"}},
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                    "containers": [
                        {
                            "$setElementOrder/env": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
                            "env": [{"name": "A", "value": "1"}],
                            "image": "app:v2",
                            "name": "app",
                        }
                    ],
                }
            }
        },
    }
    result = _smp(patch)
    app, sidecar = _template_spec(result)["containers"]
    assert app["image"] == "app:v2"
    assert app["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"},
        {"name": "C", "value": "3"},
    ]
    assert app["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert sidecar == {"name": "sidecar", "image": "proxy:v1"}
    assert _at(result, "metadata", "annotations") == {
        "team": "core",
        "kubectl.kubernetes.io/last-applied-configuration": "{}\n",
    }
    assert "$setElementOrder/containers" not in json.dumps(result)


def test_kubectl_apply_removes_a_container_and_an_env_var() -> None:
    patch: JsonObject = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "app"}],
                    "containers": [
                        {
                            "$setElementOrder/env": [{"name": "C"}],
                            "env": [{"$patch": "delete", "name": "B"}],
                            "name": "app",
                        },
                        {"$patch": "delete", "name": "sidecar"},
                    ],
                }
            }
        }
    }
    containers = _template_spec(_smp(patch))["containers"]
    assert [c["name"] for c in containers] == ["app"]
    assert containers[0]["env"] == [{"name": "C", "value": "3"}]


def test_kubectl_apply_reorders_containers_with_set_element_order_only() -> None:
    patch: JsonObject = {
        "spec": {
            "template": {
                "spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}]}
            }
        }
    }
    containers = _template_spec(_smp(patch))["containers"]
    assert [c["name"] for c in containers] == ["sidecar", "app"]


def test_kubectl_apply_strategy_switch_uses_retain_keys() -> None:
    # RollingUpdate -> Recreate: DeploymentSpec.strategy is tagged retainKeys, so kubectl
    # sends $retainKeys and the server clears rollingUpdate.
    patch: JsonObject = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert _at(_smp(patch), "spec", "strategy") == {"type": "Recreate"}
    # Without the directive the old rollingUpdate block would survive.
    kept = _at(_smp({"spec": {"strategy": {"type": "Recreate"}}}), "spec", "strategy")
    assert _at(kept, "rollingUpdate") == {"maxSurge": "25%", "maxUnavailable": "25%"}


def test_kubectl_apply_switches_a_volume_source_with_retain_keys() -> None:
    patch: JsonObject = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/volumes": [{"name": "data"}],
                    "volumes": [
                        {
                            "$retainKeys": ["configMap", "name"],
                            "configMap": {"name": "cfg"},
                            "name": "data",
                        }
                    ],
                }
            }
        }
    }
    volumes = _template_spec(_smp(patch))["volumes"]
    assert volumes == [{"name": "data", "configMap": {"name": "cfg"}}]


def test_kubectl_patch_strategic_updates_one_container_by_name() -> None:
    # kubectl patch deploy web -p '{"spec":{"template":{"spec":{"containers":[...]}}}}'
    patch: JsonObject = {
        "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "proxy:v2"}]}}}
    }
    containers = _template_spec(_smp(patch))["containers"]
    assert containers[0] == _template_spec(_deployment())["containers"][0]
    assert containers[1] == {"name": "sidecar", "image": "proxy:v2"}


def test_kubectl_patch_strategic_puts_a_new_container_first() -> None:
    # Without $setElementOrder a new element lands before the server-only ones
    # (mergeSortedSlice); kubernetes.io's "Update API Objects in Place Using kubectl patch"
    # task shows the same: the added redis container is listed before nginx.
    patch: JsonObject = {
        "spec": {"template": {"spec": {"containers": [{"name": "debug", "image": "busybox"}]}}}
    }
    names = [c["name"] for c in _template_spec(_smp(patch))["containers"]]
    assert names == ["debug", "app", "sidecar"]


def test_kubectl_patch_merges_ports_by_container_port() -> None:
    patch: JsonObject = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "ports": [{"containerPort": 8080, "name": "http"}]}
                    ]
                }
            }
        }
    }
    ports = _template_spec(_smp(patch))["containers"][0]["ports"]
    assert ports == [{"containerPort": 8080, "protocol": "TCP", "name": "http"}]


def test_merge_keys_compare_like_go_interfaces() -> None:
    # "8080" (string) is not 8080 (int64) in Go: the port is added, not merged.
    patch: JsonObject = {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "app", "ports": [{"containerPort": "8080"}]}]}
            }
        }
    }
    ports = _template_spec(_smp(patch))["containers"][0]["ports"]
    assert ports == [{"containerPort": "8080"}, {"containerPort": 8080, "protocol": "TCP"}]


def test_kubectl_rollout_restart() -> None:
    patch: JsonObject = {
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {"kubectl.kubernetes.io/restartedAt": "2024-05-01T12:00:00Z"}
                }
            }
        }
    }
    result = _smp(patch)
    assert _at(result, "spec", "template", "metadata") == {
        "labels": {"app": "web"},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2024-05-01T12:00:00Z"},
    }
    expected = _deployment()
    _at(expected, "spec", "template", "metadata")["annotations"] = {
        "kubectl.kubernetes.io/restartedAt": "2024-05-01T12:00:00Z"
    }
    assert result == expected


def _node() -> JsonObject:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"zone": "a"}},
        "spec": {
            "podCIDRs": ["10.0.0.0/24"],
            "taints": [{"key": "a", "effect": "NoSchedule"}],
        },
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.1.0.1"},
                {"type": "Hostname", "address": "n1"},
            ],
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "t0"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "t0"},
            ],
        },
    }


def test_kubectl_cordon_and_uncordon() -> None:
    cordoned = apply_strategic_merge_patch(_node(), {"spec": {"unschedulable": True}}, "Node")
    assert _at(cordoned, "spec", "unschedulable") is True
    uncordoned = apply_strategic_merge_patch(cordoned, {"spec": {"unschedulable": None}}, "Node")
    assert uncordoned == _node()


def test_node_spec_taints_are_atomic_upstream() -> None:
    # core/v1 NodeSpec.Taints carries no patchStrategy: a patch replaces the whole list.
    patch: JsonObject = {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}
    result = apply_strategic_merge_patch(_node(), patch, "Node")
    assert _at(result, "spec", "taints") == [{"key": "b", "effect": "NoExecute"}]


def test_pod_spec_tolerations_are_atomic_upstream() -> None:
    # core/v1 PodSpec.Tolerations carries no patchStrategy: a patch replaces the whole list.
    patch: JsonObject = {
        "spec": {"template": {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}}
    }
    assert _template_spec(_smp(patch))["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_kubelet_node_status_heartbeat_merges_conditions_by_type() -> None:
    patch: JsonObject = {
        "status": {
            "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
            "conditions": [
                {"type": "MemoryPressure", "lastHeartbeatTime": "t1"},
                {"type": "Ready", "lastHeartbeatTime": "t1"},
            ],
            "addresses": [{"type": "Hostname", "address": "n1.local"}],
        }
    }
    status = apply_strategic_merge_patch(_node(), patch, "Node")["status"]
    assert status == {
        "addresses": [
            {"type": "InternalIP", "address": "10.1.0.1"},
            {"type": "Hostname", "address": "n1.local"},
        ],
        "conditions": [
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "t1"},
            {"type": "Ready", "status": "True", "lastHeartbeatTime": "t1"},
        ],
    }


def test_node_pod_cidrs_merge_as_a_set() -> None:
    patch: JsonObject = {"spec": {"podCIDRs": ["10.0.0.0/24", "fd00::/64"]}}
    result = apply_strategic_merge_patch(_node(), patch, "Node")
    assert _at(result, "spec", "podCIDRs") == ["10.0.0.0/24", "fd00::/64"]


def _pod() -> JsonObject:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "finalizers": ["a.example/keep"],
            "ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "web-abc"}],
        },
        "spec": {"containers": [{"name": "app", "image": "app:v1"}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False"},
                {"type": "PodScheduled", "status": "True"},
            ],
            "containerStatuses": [{"name": "app", "ready": False, "restartCount": 0}],
        },
    }


def test_kubelet_pod_status_patch() -> None:
    patch: JsonObject = {
        "metadata": {"uid": "pod-uid"},
        "status": {
            "$setElementOrder/conditions": [
                {"type": "Initialized"},
                {"type": "Ready"},
                {"type": "ContainersReady"},
                {"type": "PodScheduled"},
            ],
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "t1"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "t1"},
            ],
            "containerStatuses": [{"name": "app", "ready": True, "started": True}],
            "phase": "Running",
            "podIPs": [{"ip": "10.0.0.5"}],
        },
    }
    status = apply_strategic_merge_patch(_pod(), patch, "Pod")["status"]
    assert status == {
        "phase": "Running",
        "conditions": [
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "t1"},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": "t1"},
            {"type": "PodScheduled", "status": "True"},
        ],
        # containerStatuses is atomic upstream: replaced, not merged.
        "containerStatuses": [{"name": "app", "ready": True, "started": True}],
        "podIPs": [{"ip": "10.0.0.5"}],
    }


def test_finalizers_merge_as_a_set_and_delete_from_primitive_list() -> None:
    added = apply_strategic_merge_patch(
        _pod(), {"metadata": {"finalizers": ["b.example/x", "a.example/keep"]}}, "Pod"
    )
    assert _at(added, "metadata", "finalizers") == ["b.example/x", "a.example/keep"]
    removed = apply_strategic_merge_patch(
        added, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example/keep"]}}, "Pod"
    )
    assert _at(removed, "metadata", "finalizers") == ["b.example/x"]


def test_owner_references_merge_by_uid() -> None:
    patch: JsonObject = {
        "metadata": {
            "ownerReferences": [
                {"uid": "u1", "controller": True},
                {"uid": "u2", "kind": "Node", "name": "n1"},
            ]
        }
    }
    refs = _at(apply_strategic_merge_patch(_pod(), patch, "Pod"), "metadata", "ownerReferences")
    assert refs == [
        {"uid": "u1", "kind": "ReplicaSet", "name": "web-abc", "controller": True},
        {"uid": "u2", "kind": "Node", "name": "n1"},
    ]


def test_service_ports_merge_by_port() -> None:
    service: JsonObject = {
        "kind": "Service",
        "spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 443}]},
    }
    patch: JsonObject = {"spec": {"ports": [{"port": 443, "targetPort": 8443}]}}
    ports = _at(apply_strategic_merge_patch(service, patch, "Service"), "spec", "ports")
    assert ports == [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]


def test_pdb_selector_is_replaced_while_deployment_selector_merges() -> None:
    pdb: JsonObject = {"spec": {"selector": {"matchLabels": {"app": "a", "tier": "x"}}}}
    patch: JsonObject = {"spec": {"selector": {"matchLabels": {"app": "b"}}}}
    replaced = apply_strategic_merge_patch(pdb, patch, "PodDisruptionBudget")
    assert replaced["spec"] == {"selector": {"matchLabels": {"app": "b"}}}
    merged = _at(_smp(patch), "spec", "selector")
    assert merged == {"matchLabels": {"app": "b"}}
    two_labels = _smp({"spec": {"selector": {"matchLabels": {"tier": "x"}}}})
    assert _at(two_labels, "spec", "selector") == {"matchLabels": {"app": "web", "tier": "x"}}


def test_webhook_configuration_merges_webhooks_by_name() -> None:
    config: JsonObject = {
        "webhooks": [
            {"name": "evict.graceful-drain", "failurePolicy": "Ignore", "clientConfig": {}},
            {"name": "other", "failurePolicy": "Fail"},
        ]
    }
    patch: JsonObject = {
        "webhooks": [{"name": "evict.graceful-drain", "clientConfig": {"caBundle": "Q0E="}}]
    }
    result = apply_strategic_merge_patch(config, patch, "ValidatingWebhookConfiguration")
    assert result["webhooks"] == [
        {
            "name": "evict.graceful-drain",
            "failurePolicy": "Ignore",
            "clientConfig": {"caBundle": "Q0E="},
        },
        {"name": "other", "failurePolicy": "Fail"},
    ]


def test_replace_directive_on_a_list_and_delete_directive_on_a_map() -> None:
    patch: JsonObject = {
        "metadata": {"annotations": {"$patch": "delete"}},
        "spec": {
            "template": {
                "spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "i"}]}
            }
        },
    }
    result = _smp(patch)
    assert _at(result, "metadata", "annotations") == {}
    assert _template_spec(result)["containers"] == [{"name": "only", "image": "i"}]


def test_replace_directive_on_a_map() -> None:
    patch: JsonObject = {"spec": {"template": {"metadata": {"$patch": "replace", "labels": {}}}}}
    assert _at(_smp(patch), "spec", "template", "metadata") == {"labels": {}}


def test_directive_only_map_missing_from_the_original_is_dropped() -> None:
    # removeDirectives: a new value that carries $patch is not kept at all.
    pod = _pod()
    del _at(pod, "metadata")["finalizers"]
    result = apply_strategic_merge_patch(
        pod, {"metadata": {"labels": {"$patch": "replace"}}}, "Pod"
    )
    assert "labels" not in _at(result, "metadata")


def test_null_deletes_and_nulls_in_new_values_are_discarded() -> None:
    patch: JsonObject = {
        "metadata": {"annotations": {"team": None}},
        "spec": {"paused": None, "minReadySeconds": None, "revisionHistoryLimit": 3},
        "status": {"conditions": None, "observed": {"a": None, "b": 1}},
    }
    result = _smp(patch)
    assert _at(result, "metadata", "annotations") == {}
    assert _at(result, "spec", "revisionHistoryLimit") == 3
    assert result["status"] == {"observed": {"b": 1}}


def test_unconsumed_directives_are_stripped_like_a_typed_decode() -> None:
    patch: JsonObject = {
        "spec": {
            "template": {
                "spec": {
                    # tolerations are atomic: the element is taken as is, minus the directive.
                    "tolerations": [{"$patch": "delete", "key": "a"}],
                    # a brand-new container carrying an order directive for its env
                    "containers": [
                        {
                            "name": "new",
                            "$setElementOrder/env": [{"name": "X"}],
                            "env": [{"name": "X"}],
                        }
                    ],
                }
            }
        }
    }
    spec = _template_spec(_smp(patch))
    assert spec["tolerations"] == [{"key": "a"}]
    assert spec["containers"][0] == {"name": "new", "env": [{"name": "X"}]}


@pytest.mark.parametrize(
    ("patch", "error_type", "message"),
    [
        (
            {"spec": {"template": {"spec": {"containers": [{"$patch": "foo", "name": "app"}]}}}},
            PatchInternalError,
            "unknown patch type: foo in map: map[$patch:foo name:app]",
        ),
        (
            {"spec": {"template": {"spec": {"$patch": 5}}}},
            PatchInternalError,
            "unknown patch type: %!s(int64=5) in map: map[$patch:5]",
        ),
        (
            # `$patch: merge` is not a map directive: upstream answers "unknown patch type".
            {"metadata": {"annotations": {"$patch": "merge"}}},
            PatchInternalError,
            "unknown patch type: merge in map: map[$patch:merge]",
        ),
        (
            {"spec": {"template": {"spec": {"containers": [{"$patch": "merge", "name": "a"}]}}}},
            PatchInternalError,
            "merging lists cannot yet be specified in the patch",
        ),
        (
            {"spec": {"template": {"spec": {"containers": [{"image": "nginx"}]}}}},
            PatchInternalError,
            "map: map[image:nginx] does not contain declared merge key: name",
        ),
        (
            {"spec": {"template": {"spec": {"containers": [{"$patch": "delete"}]}}}},
            PatchInternalError,
            "map: map[$patch:delete] does not contain declared merge key: name",
        ),
        (
            {"spec": {"template": {"spec": {"containers": ["app"]}}}},
            PatchInternalError,
            "list element types are not identical: "
            f"[{go_sprint(_template_spec(_deployment())['containers'])} [app]]",
        ),
        (
            {"spec": {"template": {"spec": {"$setElementOrder/containers": "app"}}}},
            PatchInternalError,
            "expected a []interface {}, but received a string",
        ),
        (
            {"spec": {"strategy": {"$retainKeys": "type"}}},
            PatchBadRequest,
            "invalid patch format of retainKeys",
        ),
        (
            {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}},
            PatchBadRequest,
            "invalid patch format of retainKeys",
        ),
        (
            {"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}},
            PatchBadRequest,
            "invalid patch format of primitive list",
        ),
        (
            {"metadata": {"$setElementOrderfinalizers": ["a"]}},
            PatchBadRequest,
            "invalid patch format of setElementOrder list",
        ),
        (
            ["not", "a", "map"],
            PatchBadRequest,
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
    ],
)
def test_strategic_merge_errors_use_upstream_codes(
    patch: Json, error_type: type[PatchError], message: str
) -> None:
    with pytest.raises(error_type) as raised:
        _smp(patch)
    assert raised.value.message == message
    assert type(raised.value) is error_type


def test_strategic_merge_plain_errors_answer_500_with_an_unknown_reason() -> None:
    with pytest.raises(PatchInternalError) as raised:
        _smp({"spec": {"template": {"spec": {"containers": [{"image": "nginx"}]}}}})
    assert raised.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "map: map[image:nginx] does not contain declared merge key: name",
        "code": 500,
    }


def test_lists_of_lists_are_422() -> None:
    doc: JsonObject = {"metadata": {"finalizers": [["a"]]}}
    with pytest.raises(PatchInvalid) as raised:
        apply_strategic_merge_patch(doc, {"metadata": {"finalizers": [["b"]]}}, "Pod")
    assert raised.value.detail == "lists of lists are not supported"
    assert raised.value.message == GENERIC_422_MESSAGE


def test_strategic_merge_for_a_kind_without_tags_is_415() -> None:
    with pytest.raises(PatchUnsupportedMediaType) as raised:
        apply_strategic_merge_patch({}, {}, "Widget")
    assert raised.value.accepted == (
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    )


def test_null_strategic_patch_is_a_no_op() -> None:
    assert _smp(None) == _deployment()


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        (1.5, "1.5"),
        (123456.0, "123456"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5e-07, "-2.5e-07"),
        (0.0, "0"),
        (80, "80"),
        ({"b": 1, "a": [True, None, "x"]}, "map[a:[true <nil> x] b:1]"),
    ],
)
def test_messages_print_values_as_go_fmt_does(value: Json, printed: str) -> None:
    assert go_sprint(value) == printed


# --- apply_patch (the server entry point) -------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "patch"),
    [
        (PatchKind.JSON, [{"op": "add", "path": "/spec/replicas", "value": 2}]),
        (PatchKind.MERGE, {"spec": {"replicas": 2}}),
        (PatchKind.STRATEGIC, {"spec": {"replicas": 2}}),
    ],
)
def test_apply_patch_dispatches_on_kind(kind: PatchKind, patch: Json) -> None:
    result = apply_patch(kind, _deployment(), patch, "Deployment")
    assert _at(result, "spec", "replicas") == 2


@pytest.mark.parametrize(
    ("kind", "patch"),
    [
        (PatchKind.MERGE, ["a"]),
        (PatchKind.JSON, [{"op": "replace", "path": "", "value": []}]),
    ],
)
def test_apply_patch_result_must_stay_an_object(kind: PatchKind, patch: Json) -> None:
    with pytest.raises(PatchInvalid) as raised:
        apply_patch(kind, _deployment(), patch, "Deployment")
    status = raised.value.status()
    assert status["code"] == 422
    assert _at(status, "details", "causes", 0, "field") == "patch"
    assert raised.value.message.startswith(' "" is invalid: patch: Invalid value: "[')


# --- Properties ---------------------------------------------------------------------------

_keys = st.text(alphabet="ab~/$.", min_size=1, max_size=3)
_plain_keys = st.text(alphabet="abcxyz", min_size=1, max_size=3)
_scalars = (
    st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)


def _json(keys: st.SearchStrategy[str], *, nulls: bool) -> st.SearchStrategy[Json]:
    leaves = (_scalars | st.none()) if nulls else _scalars
    return st.recursive(
        leaves,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4)
        ),
        max_leaves=16,
    )


_objects = st.dictionaries(_keys, _json(_keys, nulls=True), max_size=5)
_null_free_objects = st.dictionaries(_plain_keys, _json(_plain_keys, nulls=False), max_size=5)
# Nulls only as object members outside any array: the deletions a merge patch expresses.
_merge_patches: st.SearchStrategy[JsonObject] = st.deferred(
    lambda: st.dictionaries(
        _plain_keys,
        st.none() | _json(_plain_keys, nulls=False) | _merge_patches,
        max_size=4,
    )
)


def _containers(doc: Json, pointer: str = "") -> list[tuple[str, Json]]:
    found: list[tuple[str, Json]] = []
    if isinstance(doc, dict):
        found.append((pointer, doc))
        for key, value in doc.items():
            escaped = key.replace("~", "~0").replace("/", "~1")
            found.extend(_containers(value, f"{pointer}/{escaped}"))
    elif isinstance(doc, list):
        found.append((pointer, doc))
        for index, value in enumerate(doc):
            found.extend(_containers(value, f"{pointer}/{index}"))
    return found


@given(doc=_objects, value=_json(_keys, nulls=True), data=st.data())
def test_json_patch_add_then_remove_restores_the_document(
    doc: JsonObject, value: Json, data: st.DataObject
) -> None:
    pointer, container = data.draw(st.sampled_from(_containers(doc)))
    if isinstance(container, dict):
        key = data.draw(_keys.filter(lambda k: k not in container))
        token = key.replace("~", "~0").replace("/", "~1")
    else:
        assert isinstance(container, list)
        token = str(data.draw(st.integers(min_value=0, max_value=len(container))))
    path = f"{pointer}/{token}"
    before = copy.deepcopy(doc)
    operations: list[Json] = [
        {"op": "add", "path": path, "value": value},
        {"op": "test", "path": path, "value": value},
        {"op": "remove", "path": path},
    ]
    assert apply_json_patch(doc, operations) == before
    assert doc == before


@given(doc=_objects, operations=st.lists(_json(_keys, nulls=True), max_size=4))
def test_json_patch_never_mutates_its_inputs(doc: JsonObject, operations: list[Json]) -> None:
    before = copy.deepcopy((doc, operations))
    with contextlib.suppress(PatchError):
        apply_json_patch(doc, operations)
    assert (doc, operations) == before


@given(doc=_null_free_objects)
def test_merge_patch_of_a_document_with_itself_is_identity(doc: JsonObject) -> None:
    assert apply_merge_patch(doc, doc) == doc


def _has_null(value: Json) -> bool:
    if isinstance(value, dict):
        return any(v is None or _has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(v is None or _has_null(v) for v in value)
    return False


@given(doc=_null_free_objects, patch=_merge_patches)
def test_merge_patch_results_never_contain_null(doc: JsonObject, patch: JsonObject) -> None:
    assert not _has_null(apply_merge_patch(doc, patch))


@given(doc=_objects, patch=_json(_keys, nulls=True))
def test_merge_patch_never_mutates_its_inputs(doc: JsonObject, patch: Json) -> None:
    before = copy.deepcopy((doc, patch))
    with contextlib.suppress(PatchError):
        apply_merge_patch(doc, patch)
    assert (doc, patch) == before


@given(doc=_null_free_objects, patch=_merge_patches)
def test_strategic_merge_without_tags_equals_merge_patch(
    doc: JsonObject, patch: JsonObject
) -> None:
    # With no list strategies and no directives, strategic merge is JSON merge patch.
    assert strategic_merge(doc, patch, EMPTY_SCHEMA) == apply_merge_patch(doc, patch)


_names = st.sampled_from(["a", "b", "c", "d"])
_env = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["X", "Y", "Z"])}, optional={"value": _names}),
    max_size=3,
    unique_by=lambda e: e["name"],
)
_container = st.fixed_dictionaries({"name": _names}, optional={"image": _names, "env": _env})
_live_pods = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {}, optional={"finalizers": st.lists(_names, unique=True, max_size=3)}
        ),
        "spec": st.fixed_dictionaries(
            {"containers": st.lists(_container, max_size=4, unique_by=lambda c: c["name"])}
        ),
    }
)
_container_patch = _container | st.fixed_dictionaries({"name": _names, "$patch": st.just("delete")})
_pod_patches = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "finalizers": st.lists(_names, max_size=3, unique=True),
                "$deleteFromPrimitiveList/finalizers": st.lists(_names, max_size=2),
            },
        ),
        "spec": st.fixed_dictionaries(
            {"containers": st.lists(_container_patch, max_size=3, unique_by=lambda c: c["name"])}
        ),
    },
)


@given(pod=_live_pods, patch=_pod_patches)
@settings(max_examples=200)
def test_strategic_merge_on_pods(pod: JsonObject, patch: JsonObject) -> None:
    before = copy.deepcopy((pod, patch))
    result = apply_strategic_merge_patch(pod, patch, "Pod")
    assert (pod, patch) == before, "inputs must not be mutated"
    assert "$" not in json.dumps(result), "directives must not leak into the result"
    assert apply_strategic_merge_patch(result, patch, "Pod") == result, "idempotent"
    names = [c["name"] for c in _at(result, "spec", "containers")]
    assert len(names) == len(set(names))
    patched: list[Any] = _at(patch, "spec", "containers") if "spec" in patch else []
    deleted = {c["name"] for c in patched if "$patch" in c}
    assert not deleted & set(names)
