"""JSON merge patch (RFC 7386) as gopkg.in/evanphx/json-patch.v4 ``MergePatch`` applies it.

Two quirks of that library are kept because the API server has them: a null inside an array is
kept (RFC 7386 replaces arrays verbatim), but nulls inside objects nested in a newly added value
are pruned; and a non-object patch value replacing an object is taken as is, unpruned.
"""

from kubesim import jsoncodec
from kubesim.apiserver.patching.errors import PatchBadRequest
from kubesim.apiserver.patching.jsontypes import Json, JsonObject

ERR_BAD_JSON_PATCH = "Invalid JSON Patch"


def apply_merge_patch(doc: Json, patch: Json) -> Json:
    """Return ``doc`` with the merge ``patch`` applied; neither argument is modified.

    Raises :class:`PatchBadRequest` ("Invalid JSON Patch") for a null, string, number or
    boolean patch, as upstream does. An array patch replaces the document.
    """
    if isinstance(patch, dict):
        if isinstance(doc, dict):
            merged = jsoncodec.copy(doc)
            _merge_objects(merged, jsoncodec.copy(patch))
            return merged
        return _prune_nulls(jsoncodec.copy(patch))
    if isinstance(patch, list):
        return _prune_nulls(jsoncodec.copy(patch))
    raise PatchBadRequest(ERR_BAD_JSON_PATCH)


def _merge_objects(doc: JsonObject, patch: JsonObject) -> None:
    for key, value in patch.items():
        if value is None:
            doc.pop(key, None)
        elif doc.get(key) is None:
            doc[key] = _prune_nulls(value)
        else:
            doc[key] = _merge_value(doc[key], value)


def _merge_value(current: Json, patch: Json) -> Json:
    if not isinstance(current, dict):
        return _prune_nulls(patch)
    if not isinstance(patch, dict):
        return patch
    _merge_objects(current, patch)
    return current


def _prune_nulls(value: Json) -> Json:
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for item in value.values():
            _prune_nulls(item)
    elif isinstance(value, list):
        for item in value:
            _prune_nulls(item)
    return value
