"""A minimal OpenAPI v3 document per group version: enough for kubectl, not a full schema.

kubectl asks `/openapi/v3` whether the server supports server-side field
validation (a `fieldValidation` query parameter on each resource's PATCH
operation, matched by `x-kubernetes-group-version-kind`). When it does,
kubectl skips client-side schema validation and sends `fieldValidation=Strict`.
PATCH operations carry no request-body schema, so `kubectl apply` computes its
strategic merge patches from its built-in types, exactly as it does against a
server whose OpenAPI it cannot use for patching (kubectl's apply/patcher.go).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit

from .resources import ResourceRegistry, ResourceType

Obj = dict[str, Any]

_QUERY_PARAMS = ("fieldValidation", "fieldManager", "dryRun", "force", "pretty")


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _operation(t: ResourceType, action: str) -> Obj:
    return {
        "operationId": f"{action}{t.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": t.group, "version": t.version,
                                            "kind": t.kind},
        "parameters": [{"name": p, "in": "query", "schema": {"type": "string"}}
                       for p in _QUERY_PARAMS],
        "responses": {"200": {"description": "OK"}},
    }  # fmt: skip


def group_version_document(resources: ResourceRegistry, group: str, version: str) -> Obj:
    paths: Obj = {}
    for t in resources.in_group_version(group, version):
        base = "/" + _gv_path(group, version)
        collection = (
            f"{base}/namespaces/{{namespace}}/{t.plural}"
            if t.namespaced
            else (f"{base}/{t.plural}")
        )
        paths[collection] = {"post": _operation(t, "post")}
        if not t.virtual:
            paths[f"{collection}/{{name}}"] = {
                "patch": _operation(t, "patch"),
                "put": _operation(t, "put"),
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "kubesim", "version": "v1"},
        "paths": paths,
        "components": {"schemas": {}},
    }


class OpenApi:
    def __init__(self, resources: ResourceRegistry) -> None:
        self._docs: dict[str, Obj] = {}
        for group, versions in resources.group_versions().items():
            for version in versions:
                path = _gv_path(group, version)
                self._docs[path] = group_version_document(resources, group, version)
        self._hashes = {
            path: hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()
            for path, doc in self._docs.items()
        }

    def __call__(self, url: str) -> Obj | None:
        path = urlsplit(url).path.strip("/")
        if path == "openapi/v3":
            return {
                "paths": {
                    p: {"serverRelativeURL": f"/openapi/v3/{p}?hash={h}"}
                    for p, h in self._hashes.items()
                }
            }
        prefix = "openapi/v3/"
        if path.startswith(prefix):
            return self._docs.get(path[len(prefix) :])
        return None
