"""`/openapi/*`: a minimal OpenAPI v3 document per group version, enough for kubectl.

Each document also holds its kinds' schemas (`openapi.schemas`), which `kubectl explain`
reads. kubectl asks `/openapi/v3` whether the server supports server-side field
validation (a `fieldValidation` query parameter on each resource's PATCH
operation, matched by `x-kubernetes-group-version-kind`). When it does,
kubectl skips client-side schema validation and sends `fieldValidation=Strict`.
PATCH operations carry no request-body schema, so `kubectl apply` computes its
strategic merge patches from its built-in types, exactly as it does against a
server whose OpenAPI it cannot use for patching (kubectl's apply/patcher.go).

kubectl 1.27 and 1.28 also need `/openapi/v2`, one document for the whole API, in
protobuf: see `openapi.v2`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from kubesim.apiserver.openapi import v2
from kubesim.apiserver.openapi.paths import QUERY_PARAMS, gv_path, operation_paths
from kubesim.apiserver.openapi.schemas import SCHEMAS_REVISION, component_schemas, kinds_of
from kubesim.apiserver.openapi.v2_protobuf import encode_document
from kubesim.apiserver.resources import ResourceRegistry, ResourceType
from kubesim.types import Obj


@dataclass(frozen=True, slots=True)
class RawResponse:
    """An answer the server sends as is, rather than as JSON."""

    status: int
    body: bytes = b""
    content_type: str | None = None


def _operation(t: ResourceType, action: str) -> Obj:
    return {
        "operationId": f"{action}{t.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": t.group, "version": t.version,
                                            "kind": t.kind},
        "parameters": [{"name": p, "in": "query", "schema": {"type": "string"}}
                       for p in QUERY_PARAMS],
        "responses": {"200": {"description": "OK"}},
    }  # fmt: skip


def group_version_document(resources: ResourceRegistry, group: str, version: str) -> Obj:
    """The group version's paths, and (built once per process, see `schemas`) the schemas
    of its kinds, for `kubectl explain`."""
    paths: Obj = {}
    types = resources.in_group_version(group, version)
    for t in types:
        for path, methods in operation_paths(t).items():
            paths[path] = {method: _operation(t, method) for method in methods}
    kinds = kinds_of((t.api_version, t.kind) for t in types)
    return {
        "openapi": "3.0.0",
        "info": {"title": "kubesim", "version": "v1"},
        "paths": paths,
        "components": {"schemas": _Lazy(kinds)},
    }


class _Lazy(dict[str, Obj]):
    """The schemas of these kinds, built on first use (a KubeSim that no kubectl asks for
    them never builds them); equal to and hashed as the kinds alone."""

    def __init__(self, kinds: tuple[tuple[str, str], ...]) -> None:
        super().__init__()
        self.kinds = kinds

    def built(self) -> Obj:
        return component_schemas(self.kinds)


def _kinds(value: object) -> object:
    """json.dumps' fallback for the unbuilt schemas: what they are built from."""
    if isinstance(value, _Lazy):
        return {"kinds": value.kinds, "schemas": SCHEMAS_REVISION}
    raise TypeError(f"not JSON: {value!r}")


class OpenApi:
    def __init__(self, resources: ResourceRegistry) -> None:
        self._docs: dict[str, Obj] = {}
        for group, versions in resources.group_versions().items():
            for version in versions:
                path = gv_path(group, version)
                self._docs[path] = group_version_document(resources, group, version)
        self._hashes = {
            path: hashlib.sha512(json.dumps(doc, sort_keys=True, default=_kinds).encode())
            .hexdigest()[:64]
            .upper()
            for path, doc in self._docs.items()
        }
        self._v2 = v2.swagger_document(resources)
        self._v2_protobuf = encode_document(self._v2)

    def __call__(self, url: str, accept: str = "") -> Obj | RawResponse | None:
        """The answer to a GET of `url` with this Accept header, None for a 404."""
        path = urlsplit(url).path.strip("/")
        if path == "openapi/v2":
            return self._v2_answer(accept)
        if path == "openapi/v3":
            return {
                "paths": {
                    p: {"serverRelativeURL": f"/openapi/v3/{p}?hash={h}"}
                    for p, h in self._hashes.items()
                }
            }
        prefix = "openapi/v3/"
        if path.startswith(prefix):
            doc = self._docs.get(path[len(prefix) :])
            if doc is None:
                return None
            lazy = doc["components"]["schemas"]
            return {**doc, "components": {"schemas": lazy.built()}}
        return None

    def _v2_answer(self, accept: str) -> Obj | RawResponse:
        media_type = v2.negotiate(accept)
        if media_type == v2.PROTOBUF_MEDIA_TYPE:
            return RawResponse(200, self._v2_protobuf, media_type)
        if media_type == v2.JSON_MEDIA_TYPE:
            return self._v2
        return RawResponse(406)  # kube-openapi answers an unacceptable Accept with no body
