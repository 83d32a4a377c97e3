"""A PATCH request's body applied to the stored object: content type, decoding, errors."""

from __future__ import annotations

from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.patching.apply import (
    PatchError,
    apply_patch,
    content_type_to_patch_kind,
    decode_patch_body,
)
from kubesim.apiserver.resources import ResourceType
from kubesim.types import Obj


def patched_object(
    rt: ResourceType, current: Obj, raw: bytes, content_type: str, kind: str | None = None
) -> Obj:
    """`current` with the patch applied; ApiError with the upstream code and Status otherwise."""
    try:
        patch_kind = content_type_to_patch_kind(content_type)
        patch = decode_patch_body(patch_kind, raw)
        return apply_patch(patch_kind, current, patch, kind or rt.kind)
    except PatchError as err:
        details = err.status().get("details")
        raise ApiError(
            err.code, err.message, err.reason, details if isinstance(details, dict) else None
        ) from None
