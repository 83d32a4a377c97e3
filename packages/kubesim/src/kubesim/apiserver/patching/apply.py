"""PATCH for kubesim's API server: JSON patch, JSON merge patch and strategic merge patch.

Pure functions on decoded JSON; nothing here does I/O. The HTTP layer:

1. ``kind = content_type_to_patch_kind(request.content_type)`` (415 otherwise);
2. ``patch = decode_patch_body(kind, await request.read())`` (400 on malformed JSON);
3. ``new = apply_patch(kind, stored_object, patch, object_kind="Deployment")``;
4. on :class:`PatchError` answer ``error.code`` with body ``error.status()``.

Server-side apply (``application/apply-patch+yaml``) is not implemented. It is answered the
way an API server without it answers: 415, listing the content types that are accepted, so
``kubectl apply --server-side`` fails loudly rather than silently doing something else.
"""

import json
from enum import StrEnum
from functools import cache

from kubesim.apiserver.patching.errors import (
    GENERIC_422_MESSAGE,
    PatchBadRequest,
    PatchError,
    PatchInternalError,
    PatchInvalid,
    PatchRequestEntityTooLarge,
    PatchUnsupportedMediaType,
)
from kubesim.apiserver.patching.gofmt_values import go_json_kind
from kubesim.apiserver.patching.json_patch import MAX_JSON_PATCH_OPERATIONS, apply_json_patch
from kubesim.apiserver.patching.jsontypes import Json, JsonObject
from kubesim.apiserver.patching.merge_patch import apply_merge_patch
from kubesim.apiserver.patching.schema import FieldTag, PatchSchema, schema_from_tags
from kubesim.apiserver.patching.strategic import strategic_merge
from kubesim.apiserver.patching.strategies import PATCH_STRATEGIES

__all__ = [
    "APPLY_PATCH_CONTENT_TYPE",
    "GENERIC_422_MESSAGE",
    "MAX_JSON_PATCH_OPERATIONS",
    "PATCH_STRATEGIES",
    "FieldTag",
    "Json",
    "JsonObject",
    "PatchBadRequest",
    "PatchError",
    "PatchInternalError",
    "PatchInvalid",
    "PatchKind",
    "PatchRequestEntityTooLarge",
    "PatchSchema",
    "PatchUnsupportedMediaType",
    "accepted_patch_content_types",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_patch",
    "apply_strategic_merge_patch",
    "content_type_to_patch_kind",
    "decode_patch_body",
    "schema_for_kind",
    "strategic_merge",
    "supports_strategic_merge",
]


class PatchKind(StrEnum):
    """A PATCH content type kubesim applies; the value is the media type."""

    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"


APPLY_PATCH_CONTENT_TYPE = "application/apply-patch+yaml"


def accepted_patch_content_types(*, strategic_merge: bool = True) -> tuple[str, ...]:
    """Media types a PATCH may use, in upstream's order; strategic merge only for built-ins."""
    kinds = (PatchKind.JSON, PatchKind.MERGE, PatchKind.STRATEGIC)
    patches = tuple(str(k) for k in kinds if strategic_merge or k is not PatchKind.STRATEGIC)
    # Server-side apply is served by the API server itself (managed_fields.py).
    return (*patches, APPLY_PATCH_CONTENT_TYPE)


def content_type_to_patch_kind(content_type: str, *, strategic_merge: bool = True) -> PatchKind:
    """Map a request's Content-Type to a :class:`PatchKind`.

    Like upstream, parameters after ``;`` are dropped and the rest must match exactly.
    Anything else, server-side apply included, raises :class:`PatchUnsupportedMediaType` (415).
    Pass ``strategic_merge=False`` for a kind without strategic-merge metadata (a custom
    resource upstream), so that its 415 lists the right types.
    """
    media_type = content_type
    separator = media_type.find(";")
    if separator > 0:
        media_type = media_type[:separator]
    accepted = accepted_patch_content_types(strategic_merge=strategic_merge)
    if media_type not in accepted or media_type == APPLY_PATCH_CONTENT_TYPE:
        raise PatchUnsupportedMediaType(accepted)
    return PatchKind(media_type)


def decode_patch_body(kind: PatchKind, body: bytes) -> Json:
    """Decode a PATCH body; malformed JSON is a 400 with upstream's wording where known.

    Invalid UTF-8 becomes U+FFFD, as Go's ``encoding/json`` does.
    """
    text = body.decode("utf-8", errors="replace")
    try:
        decoded: Json = json.loads(text)
    except json.JSONDecodeError as error:
        if kind is PatchKind.MERGE:
            raise PatchBadRequest("Invalid JSON Patch") from None
        raise PatchBadRequest(_go_syntax_error(error)) from None
    _check_patch_shape(kind, decoded)
    return decoded


# How Go's encoding/json names a JSON value it cannot unmarshal into the patch's type.
_GO_JSON_TYPES = ((bool, "bool"), (str, "string"), ((int, float), "number"), (list, "array"),
                  (dict, "object"))  # fmt: skip


def _check_patch_shape(kind: PatchKind, decoded: Json) -> None:
    """The API server's default field validation (Warn) first decodes the patch strictly into
    the type it expects (endpoints/handlers/patch.go): an object for merge and strategic
    merge patches, a list of operations for JSON patches. null passes that step."""
    if decoded is None:
        return
    expected = list if kind is PatchKind.JSON else dict
    if isinstance(decoded, expected):
        return
    found = next(name for types, name in _GO_JSON_TYPES if isinstance(decoded, types))
    if kind is PatchKind.JSON:
        target, prefix = "[]handlers.jsonPatchOp", "error decoding patch: "
    else:
        target = "map[string]interface {}"
        prefix = "error decoding patch: " if kind is PatchKind.MERGE else ""
    raise PatchBadRequest(f"{prefix}json: cannot unmarshal {found} into Go value of type {target}")


def _go_syntax_error(error: json.JSONDecodeError) -> str:
    if error.pos >= len(error.doc.rstrip()):
        return "unexpected end of JSON input"
    character = error.doc[error.pos]
    if error.msg == "Expecting value":
        return f"invalid character '{character}' looking for beginning of value"
    if error.msg == "Extra data":
        return f"invalid character '{character}' after top-level value"
    return f"invalid character '{character}' ({error.msg})"


def supports_strategic_merge(object_kind: str) -> bool:
    """Whether kubesim has the strategic-merge tags of ``object_kind`` (e.g. ``"Pod"``)."""
    return object_kind in PATCH_STRATEGIES


@cache
def schema_for_kind(object_kind: str) -> PatchSchema:
    """The strategic-merge schema of a served kind, built from :data:`PATCH_STRATEGIES`."""
    return schema_from_tags(object_kind, PATCH_STRATEGIES[object_kind])


def apply_strategic_merge_patch(doc: JsonObject, patch: Json, kind: str) -> JsonObject:
    """Apply a strategic merge patch to an object of ``kind`` (``"Pod"``, ``"Deployment"``...).

    A kind without strategic-merge metadata raises :class:`PatchUnsupportedMediaType`, which
    is what upstream answers for custom resources.
    """
    if not supports_strategic_merge(kind):
        raise PatchUnsupportedMediaType(accepted_patch_content_types(strategic_merge=False))
    return strategic_merge(doc, patch, schema_for_kind(kind))


def apply_patch(kind: PatchKind, doc: JsonObject, patch: Json, object_kind: str) -> JsonObject:
    """Apply a decoded PATCH body of ``kind`` to a stored object, as the API server does.

    Inputs are not modified. Beyond the three algorithms this checks what upstream's decode of
    the result into the typed object would: it must still be a JSON object (422 otherwise).
    """
    result: Json
    if kind is PatchKind.JSON:
        result = apply_json_patch(doc, patch)
    elif kind is PatchKind.MERGE:
        result = apply_merge_patch(doc, patch)
    else:
        result = apply_strategic_merge_patch(doc, patch, object_kind)
    if not isinstance(result, dict):
        raise PatchInvalid.field_invalid(
            "patch",
            json.dumps(result, separators=(",", ":")),
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{go_json_kind(result)} into Go value of type struct "
            '{ APIVersion string "json:\\"apiVersion,omitempty\\""; '
            'Kind string "json:\\"kind,omitempty\\"" }',
        )
    return result
