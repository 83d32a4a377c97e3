"""A minimal OpenAPI v2 (Swagger 2.0) document: what kubectl 1.27 and 1.28 need, no schemas.

Before validating a manifest, kubectl 1.27/1.28 parse `/openapi/v2` (the gnostic protobuf
form, see `openapi.v2_protobuf`) into models (kubectl's pkg/util/openapi NewOpenAPIData),
and fail on a 404. What they then read from it:

- the field-validation verifier (cli-runtime pkg/resource/query_param_verifier.go,
  `supportsQueryParam`, the fallback behind the v3 verifier) looks for the PATCH operation
  whose `x-kubernetes-group-version-kind` is the object's and a `fieldValidation` query
  parameter on it: found, kubectl skips client-side validation and lets the server check;
- `kubectl apply` (apply/patcher.go) reads the PATCH operation's `consumes` and then the
  Kind's model. No model is published (`definitions` is empty, so nothing has to resolve),
  so apply computes strategic merge patches from its built-in types, as it does with v3.

The same paths and query parameters as the v3 documents (`openapi.paths`).
"""

from __future__ import annotations

from kubesim.apiserver.openapi.paths import QUERY_PARAMS, operation_paths
from kubesim.apiserver.patching.apply import accepted_patch_content_types
from kubesim.apiserver.resources import ResourceRegistry, ResourceType
from kubesim.types import Obj

JSON_MEDIA_TYPE = "application/json"
PROTOBUF_MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
# What client-go's discovery client sends (openAPIV2mimePb); answered as PROTOBUF_MEDIA_TYPE.
PROTOBUF_DEPRECATED_MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

# kube-openapi pkg/handler/handler.go: the offers in order, and the Content-Type each is served as.
_OFFERS = (
    (JSON_MEDIA_TYPE, JSON_MEDIA_TYPE),
    (PROTOBUF_DEPRECATED_MEDIA_TYPE, PROTOBUF_MEDIA_TYPE),
    (PROTOBUF_MEDIA_TYPE, PROTOBUF_MEDIA_TYPE),
)


def _operation(t: ResourceType, method: str) -> Obj:
    op: Obj = {"operationId": f"{method}{t.kind}"}
    if method == "patch":
        op["consumes"] = list(accepted_patch_content_types())
    op["parameters"] = [{"name": p, "in": "query", "type": "string", "uniqueItems": True}
                        for p in QUERY_PARAMS]  # fmt: skip
    op["responses"] = {"200": {"description": "OK"}}
    op["x-kubernetes-action"] = method
    op["x-kubernetes-group-version-kind"] = {"group": t.group, "version": t.version,
                                             "kind": t.kind}  # fmt: skip
    return op


def swagger_document(resources: ResourceRegistry) -> Obj:
    """The whole API as one Swagger 2.0 document, in its JSON form."""
    paths: Obj = {}
    for t in resources.types:
        for path, methods in operation_paths(t).items():
            paths[path] = {method: _operation(t, method) for method in methods}
    return {
        "swagger": "2.0",
        "info": {"title": "kubesim", "version": "v1"},
        "paths": paths,
        "definitions": {},
    }


def _parse_accept(accept: str) -> list[tuple[str, str]]:
    """(type, subtype) of each clause, best first: higher q, then the more specific range.

    As in github.com/munnerz/goautoneg, which kube-openapi uses, a clause with q=0 is kept
    (ordered last) rather than read as a refusal, and a q that does not parse counts as 0.
    """
    clauses: list[tuple[float, bool, bool, str, str]] = []
    for part in (accept or "*/*").split(","):
        media_range, *params = part.split(";")
        media_range = media_range.strip()
        if media_range == "*":
            kind, subtype = "*", "*"
        elif media_range.count("/") == 1:
            kind, subtype = media_range.split("/")
        else:
            continue
        q = 1.0
        for param in params:
            key, sep, value = param.partition("=")
            if sep and key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        clauses.append((-q, kind == "*", subtype == "*", kind, subtype))
    clauses.sort(key=lambda c: c[:3])
    return [(kind, subtype) for *_, kind, subtype in clauses]


def negotiate(accept: str) -> str | None:
    """The Content-Type `/openapi/v2` is served as for this Accept header, None for a 406."""
    for kind, subtype in _parse_accept(accept):
        for offered, served_as in _OFFERS:
            offered_kind, offered_subtype = offered.split("/")
            if kind in ("*", offered_kind) and subtype in ("*", offered_subtype):
                return served_as
    return None
