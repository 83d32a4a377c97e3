"""The OpenAPI v3 schemas kubesim publishes for `kubectl explain`: every served kind's
document holds a schema carrying its group-version-kind, every `$ref` resolves within the
document, the field tree follows the Go types (a Deployment's spec.strategy.rollingUpdate),
and no patch metadata or PATCH request body is published (kubectl keeps computing apply's
strategic merge patches from its built-in types)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubesim.apiserver.openapi.paths import gv_path
from kubesim.apiserver.openapi.v3 import OpenApi
from kubesim.apiserver.resources import ResourceRegistry

Obj = dict[str, Any]
RESOURCES = ResourceRegistry()
OPENAPI = OpenApi(RESOURCES)


def document(group: str, version: str) -> Obj:
    doc = OPENAPI(f"/openapi/v3/{gv_path(group, version)}")
    assert isinstance(doc, dict)
    return doc


def refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        own = [value["$ref"]] if "$ref" in value else []
        return own + [r for v in value.values() for r in refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in refs(v)]
    return []


@pytest.mark.parametrize("rt", RESOURCES.types, ids=lambda t: f"{t.api_version}/{t.kind}")
def test_every_kind_has_a_schema_whose_refs_resolve(rt: Any) -> None:
    doc = document(rt.group, rt.version)
    schemas = doc["components"]["schemas"]
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    assert [name for name, s in schemas.items()
            if gvk in s.get("x-kubernetes-group-version-kind", [])]  # fmt: skip
    for ref in refs(schemas):
        assert ref.removeprefix("#/components/schemas/") in schemas, ref
    text = json.dumps(doc)
    assert "x-kubernetes-patch-strategy" not in text and "requestBody" not in text


def test_the_deployment_field_tree() -> None:
    schemas = document("apps", "v1")["components"]["schemas"]
    deployment = schemas["io.k8s.api.apps.v1.Deployment"]
    spec = schemas[deployment["properties"]["spec"]["allOf"][0]["$ref"].rsplit("/", 1)[1]]
    strategy = schemas[spec["properties"]["strategy"]["$ref"].rsplit("/", 1)[1]]
    assert set(strategy["properties"]) == {"type", "rollingUpdate"}
    assert spec["properties"]["replicas"] == {"type": "integer", "format": "int32"}
    pod_spec = schemas["io.k8s.api.core.v1.PodSpec"]
    assert pod_spec["properties"]["containers"]["type"] == "array"
    assert "containers" in pod_spec["required"]


def test_the_index_hash_is_stable_and_the_schemas_built_once() -> None:
    again = OpenApi(ResourceRegistry())
    assert again("/openapi/v3") == OPENAPI("/openapi/v3")
    first, second = document("apps", "v1"), again("/openapi/v3/apis/apps/v1")
    assert isinstance(second, dict)
    assert first["components"]["schemas"] is second["components"]["schemas"]
