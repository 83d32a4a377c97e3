"""Strategic merge patch, ported from k8s.io/apimachinery/pkg/util/strategicpatch (patch.go).

This is the server half only (``StrategicMergeMapPatch``: parallel lists merged, unmatched
nulls ignored). Go's ``interface{}`` equality is kept: ``1`` and ``1.0`` or ``1`` and ``true``
never match. Error texts and HTTP codes follow ``interpretStrategicMergePatchError`` in
staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go: a few format errors are 400,
lists of lists 422, anything else a plain 500 carrying the Go error text.

One addition: upstream decodes the merged map into the typed object, which drops any
directive keys the merge did not consume (inside atomic lists, ``replace`` maps or brand-new
values). kubesim stores plain JSON, so :func:`strategic_merge` strips them instead.
"""

from collections.abc import Hashable, Sequence
from typing import Literal

from kubesim import jsoncodec
from kubesim.apiserver.patching.errors import (
    PatchBadRequest,
    PatchInternalError,
    PatchInvalid,
)
from kubesim.apiserver.patching.gofmt_values import (
    go_json_kind,
    go_sprint,
    go_sprint_s,
    go_type_name,
)
from kubesim.apiserver.patching.jsontypes import Json, JsonObject
from kubesim.apiserver.patching.schema import PatchSchema

DIRECTIVE_MARKER = "$patch"
RETAIN_KEYS_DIRECTIVE = "$retainKeys"
DELETE_FROM_PRIMITIVE_LIST_PREFIX = "$deleteFromPrimitiveList"
SET_ELEMENT_ORDER_PREFIX = "$setElementOrder"

# mergepatch/errors.go
ERR_BAD_PATCH_FORMAT_FOR_PRIMITIVE_LIST = "invalid patch format of primitive list"
ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS = "invalid patch format of retainKeys"
ERR_BAD_PATCH_FORMAT_FOR_SET_ELEMENT_ORDER_LIST = "invalid patch format of setElementOrder list"
ERR_NO_LIST_OF_LISTS = "lists of lists are not supported"

_ElementKind = Literal["map", "scalar"]


def strategic_merge(doc: JsonObject, patch: Json, schema: PatchSchema) -> JsonObject:
    """Apply a strategic merge ``patch`` to ``doc`` under ``schema``; inputs are not modified.

    ``patch`` is the decoded request body: ``null`` is a no-op and anything other than an
    object is a 400, as when upstream unmarshals the body into a map.
    """
    if patch is None:
        return jsoncodec.copy(doc)
    if not isinstance(patch, dict):
        raise PatchBadRequest(
            f"json: cannot unmarshal {go_json_kind(patch)} "
            "into Go value of type map[string]interface {}"
        )
    merged = _merge_map(jsoncodec.copy(doc), jsoncodec.copy(patch), schema)
    _strip_directives(merged)
    return merged


# --- Go interface{} semantics -------------------------------------------------------------


def _go_key(value: Json) -> Hashable:
    """A hashable standing for a Go interface value used as a map key."""
    if isinstance(value, dict | list):
        raise PatchInternalError(f"runtime error: hash of unhashable type {go_type_name(value)}")
    return (type(value), value)


def _go_equal(left: Json, right: Json) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, dict | list):
        raise PatchInternalError(f"runtime error: comparing uncomparable type {go_type_name(left)}")
    return left == right


def _no_merge_key(item: JsonObject, merge_key: str) -> PatchInternalError:
    return PatchInternalError(
        f"map: {go_sprint(item)} does not contain declared merge key: {merge_key}"
    )


def _bad_arg_type(expected: str, actual: Json) -> PatchInternalError:
    return PatchInternalError(f"expected a {expected}, but received a {go_type_name(actual)}")


def _bad_patch_type(directive: Json, item: JsonObject) -> PatchInternalError:
    return PatchInternalError(
        f"unknown patch type: {go_sprint_s(directive)} in map: {go_sprint(item)}"
    )


_MAP = "map[string]interface {}"
_SLICE = "[]interface {}"


# --- maps ---------------------------------------------------------------------------------


def _merge_map(original: JsonObject, patch: JsonObject, schema: PatchSchema) -> JsonObject:
    if DIRECTIVE_MARKER in patch:
        return _handle_directive_in_merge_map(patch[DIRECTIVE_MARKER], patch)
    _apply_retain_keys_directive(original, patch)
    _merge_patch_into_original(original, patch, schema)

    for patch_key, patch_value in list(patch.items()):
        key, is_delete_list = patch_key, False
        if patch_key.startswith(DELETE_FROM_PRIMITIVE_LIST_PREFIX):
            is_delete_list = True
            key = _extract_key(patch_key, DELETE_FROM_PRIMITIVE_LIST_PREFIX) or patch_key

        if patch_value is None:
            original.pop(key, None)
            continue

        if key not in original or type(original[key]) is not type(patch_value):
            if not is_delete_list:
                _discard_null_values(patch_value)
                value, keep = _remove_directives(patch_value)
                if keep:
                    original[key] = value
                else:
                    original.pop(key, None)
            continue

        current = original[key]
        meta = schema.lookup(key)
        if isinstance(current, dict):
            assert isinstance(patch_value, dict)
            original[key] = (
                patch_value
                if meta.strategy == "replace"
                else _merge_map(current, patch_value, meta.schema)
            )
        elif isinstance(current, list):
            assert isinstance(patch_value, list)
            original[key] = _merge_slice_handler(
                current, patch_value, meta.schema, meta.strategy, meta.merge_key, is_delete_list
            )
        else:
            original[key] = patch_value
    return original


def _handle_directive_in_merge_map(directive: Json, patch: JsonObject) -> JsonObject:
    if directive == "replace":
        del patch[DIRECTIVE_MARKER]
        return patch
    if directive == "delete":
        return {}
    raise _bad_patch_type(directive, patch)


def _extract_key(key: str, prefix: str) -> str:
    head, slash, rest = key.partition("/")
    if not slash or head != prefix:
        if prefix == DELETE_FROM_PRIMITIVE_LIST_PREFIX:
            raise PatchBadRequest(ERR_BAD_PATCH_FORMAT_FOR_PRIMITIVE_LIST)
        raise PatchBadRequest(ERR_BAD_PATCH_FORMAT_FOR_SET_ELEMENT_ORDER_LIST)
    return rest


def _apply_retain_keys_directive(original: JsonObject, patch: JsonObject) -> None:
    if RETAIN_KEYS_DIRECTIVE not in patch:
        return
    retain = patch.pop(RETAIN_KEYS_DIRECTIVE)
    if not isinstance(retain, list):
        raise PatchBadRequest(ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS)
    kept = {item for item in retain if isinstance(item, str)}
    for key, value in patch.items():
        if value is None or key.startswith(
            (DELETE_FROM_PRIMITIVE_LIST_PREFIX, SET_ELEMENT_ORDER_PREFIX)
        ):
            continue
        if key not in kept:
            raise PatchBadRequest(ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS)
    for key in [k for k in original if k not in kept]:
        del original[key]


def _merge_patch_into_original(
    original: JsonObject, patch: JsonObject, schema: PatchSchema
) -> None:
    """Apply every ``$setElementOrder/<list>`` with its list, then drop both from the patch."""
    for directive_key in [k for k in patch if k.startswith(SET_ELEMENT_ORDER_PREFIX)]:
        order = patch.pop(directive_key)
        if not isinstance(order, list):
            raise _bad_arg_type(_SLICE, order)
        key = _extract_key(directive_key, SET_ELEMENT_ORDER_PREFIX)
        in_original, in_patch = key in original, key in patch
        original_list: list[Json] = []
        patch_list: list[Json] = []
        if in_original:
            value = original[key]
            if not isinstance(value, list):
                raise _bad_arg_type(_SLICE, value)
            original_list = value
        if in_patch:
            value = patch[key]
            if not isinstance(value, list):
                raise _bad_arg_type(_SLICE, value)
            patch_list = value
        meta = schema.lookup(key)
        _validate_patch_with_set_order_list(patch_list, order, meta.merge_key)

        if in_original and in_patch:
            merged = _merge_slice_handler(
                original_list, patch_list, meta.schema, meta.strategy, meta.merge_key, False
            )
        elif in_original:
            merged = original_list
        elif in_patch:
            without_directives, _ = _remove_directives(patch_list)
            assert isinstance(without_directives, list)
            merged = without_directives
        else:
            continue

        if meta.merge_key:
            patch_items, server_only = _partition_maps(merged, order, meta.merge_key)
        else:
            patch_items, server_only = _partition_primitives(merged, order)
        kind = _slice_element_kind(original_list, patch_list)
        original[key] = _normalize_element_order(
            patch_items, server_only, order, original_list, meta.merge_key, kind
        )
        patch.pop(key, None)


def _validate_patch_with_set_order_list(
    patch_list: list[Json], order: list[Json], merge_key: str
) -> None:
    """The patch list must follow ``$setElementOrder``'s order (deletions aside)."""
    if not order or not patch_list:
        return
    remaining = _extract_to_delete_items(patch_list)[0] if merge_key else patch_list
    patch_index = order_index = 0
    while patch_index < len(remaining) and order_index < len(order):
        item = remaining[patch_index]
        if isinstance(item, dict) and DIRECTIVE_MARKER in item:
            patch_index += 1
            continue
        if _merge_key_value_equal(item, order[order_index], merge_key):
            patch_index += 1
        order_index += 1
    if patch_index < len(remaining) and order_index >= len(order):
        raise PatchInternalError(
            f"The order in patch list:\n{go_sprint(patch_list)}\n doesn't match "
            f"{SET_ELEMENT_ORDER_PREFIX} list:\n{go_sprint(order)}\n"
        )


def _merge_key_value_equal(left: Json, right: Json, merge_key: str) -> bool:
    if not merge_key:
        return _go_equal(left, right)
    if not isinstance(left, dict):
        raise _bad_arg_type(_MAP, left)
    if not isinstance(right, dict):
        raise _bad_arg_type(_MAP, right)
    if merge_key not in left:
        raise _no_merge_key(left, merge_key)
    if merge_key not in right:
        raise _no_merge_key(right, merge_key)
    return _go_equal(left[merge_key], right[merge_key])


# --- lists --------------------------------------------------------------------------------


def _merge_slice_handler(
    original: list[Json],
    patch: list[Json],
    schema: PatchSchema,
    strategy: str,
    merge_key: str,
    is_delete_list: bool,
) -> list[Json]:
    # A $deleteFromPrimitiveList list is merged whatever the field's strategy.
    if strategy == "merge" or is_delete_list:
        return _merge_slice(original, patch, schema, merge_key, is_delete_list)
    return patch


def _merge_slice(
    original: list[Json],
    patch: list[Json],
    schema: PatchSchema,
    merge_key: str,
    is_delete_list: bool,
) -> list[Json]:
    if not original and not patch:
        return original
    kind = _slice_element_kind(original, patch)
    if kind == "scalar":
        if is_delete_list:
            return _delete_from_slice(original, patch)
        merged = _deduplicate_scalars(original + patch)
    else:
        if not merge_key:
            raise PatchInternalError(f"cannot merge lists without merge key for {schema.name}")
        original, patch = _merge_slice_with_special_elements(original, patch, merge_key)
        merged = _merge_slice_without_special_elements(original, patch, merge_key, schema)

    if merge_key:
        patch_items, server_only = _partition_maps(merged, patch, merge_key)
    else:
        patch_items, server_only = _partition_primitives(merged, patch)
    return _normalize_element_order(patch_items, server_only, patch, original, merge_key, kind)


def _merge_slice_with_special_elements(
    original: list[Json], patch: list[Json], merge_key: str
) -> tuple[list[Json], list[Json]]:
    """Apply ``$patch`` list elements: delete by merge key, or replace the whole list."""
    plain: list[Json] = []
    replace = False
    for item in patch:
        assert isinstance(item, dict)
        if DIRECTIVE_MARKER not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE_MARKER]
        if directive == "delete":
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            original = _delete_matching_entries(original, merge_key, item[merge_key])
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchInternalError("merging lists cannot yet be specified in the patch")
        else:
            raise _bad_patch_type(directive, item)
    if replace:
        return plain, []
    return original, plain


def _find_map_by_key(items: list[Json], merge_key: str, value: Json) -> int:
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise PatchInternalError(f"value for key {index} is not a map.")
        if merge_key in item and _go_equal(item[merge_key], value):
            return index
    return -1


def _delete_matching_entries(original: list[Json], merge_key: str, value: Json) -> list[Json]:
    remaining = list(original)
    while (index := _find_map_by_key(remaining, merge_key, value)) >= 0:
        del remaining[index]
    return remaining


def _merge_slice_without_special_elements(
    original: list[Json], patch: list[Json], merge_key: str, schema: PatchSchema
) -> list[Json]:
    merged = list(original)
    for item in patch:
        assert isinstance(item, dict)
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        index = _find_map_by_key(merged, merge_key, item[merge_key])
        if index >= 0:
            current = merged[index]
            assert isinstance(current, dict)
            merged[index] = _merge_map(current, item, schema)
        else:
            merged.append(item)
    return merged


def _delete_from_slice(current: list[Json], to_delete: list[Json]) -> list[Json]:
    doomed = {_go_key(item) for item in to_delete}
    return [item for item in current if _go_key(item) not in doomed]


def _deduplicate_scalars(items: list[Json]) -> list[Json]:
    # Go's in-place algorithm: a duplicate is overwritten by the last element.
    result = list(items)
    last = len(result) - 1
    i = 0
    while i < last:
        j = i + 1
        while j <= last:
            if _go_equal(result[i], result[j]):
                result[j] = result[last]
                del result[last]
                last -= 1
                j -= 1
            j += 1
        i += 1
    return result


def _slice_element_kind(*slices: list[Json]) -> _ElementKind:
    """Upstream's ``sliceElementType``: one element type across slices, never a list."""
    first: type | None = None
    for items in slices:
        for item in items:
            if first is None:
                if item is None:
                    raise PatchInternalError(
                        "runtime error: invalid memory address or nil pointer dereference"
                    )
                if isinstance(item, list):
                    raise PatchInvalid.generic(ERR_NO_LIST_OF_LISTS)
                first = type(item)
            elif type(item) is not first:
                raise PatchInternalError(
                    f"list element types are not identical: {go_sprint(list(slices))}"
                )
    if first is None:
        raise PatchInternalError("no elements in any of the given slices")
    return "map" if first is dict else "scalar"


# --- ordering -----------------------------------------------------------------------------


def _partition_primitives(
    items: list[Json], partition_by: list[Json]
) -> tuple[list[Json], list[Json]]:
    wanted = {_go_key(item) for item in partition_by}
    present = [item for item in items if _go_key(item) in wanted]
    absent = [item for item in items if _go_key(item) not in wanted]
    return present, absent


def _partition_maps(
    items: list[Json], partition_by: list[Json], merge_key: str
) -> tuple[list[Json], list[Json]]:
    present: list[Json] = []
    absent: list[Json] = []
    for item in items:
        if not isinstance(item, dict):
            raise _bad_arg_type(_MAP, item)
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        found = _find_map_by_key(partition_by, merge_key, item[merge_key]) >= 0
        (present if found else absent).append(item)
    return present, absent


class _Positions:
    """First position of each element (or of its merge-key value) in an ordering list."""

    def __init__(self, order: Sequence[Json], merge_key: str, kind: _ElementKind) -> None:
        self._merge_key = merge_key
        self._by_map_key = kind == "map"
        self._first: dict[Hashable, int] = {}
        for position, item in enumerate(order):
            key = self._key(item)
            if key is not None:
                self._first.setdefault(key, position)

    def _key(self, item: Json) -> Hashable | None:
        value = item.get(self._merge_key) if isinstance(item, dict) else None
        if self._by_map_key:
            item = value
        if isinstance(item, dict | list):
            return None
        return (type(item), item)

    def of(self, item: Json) -> int:
        key = self._key(item)
        return -1 if key is None else self._first.get(key, -1)


def _normalize_element_order(
    patch_items: list[Json],
    server_only: list[Json],
    patch_order: list[Json],
    server_order: list[Json],
    merge_key: str,
    kind: _ElementKind,
) -> list[Json]:
    """Patch items in patch order, server-only items in live order, interleaved by live order."""
    patch_items = _normalize_slice_order(patch_items, patch_order, merge_key, kind)
    server_only = _normalize_slice_order(server_only, server_order, merge_key, kind)
    return _merge_sorted_slices(server_only, patch_items, server_order, merge_key, kind)


def _normalize_slice_order(
    items: list[Json], order: list[Json], merge_key: str, kind: _ElementKind
) -> list[Json]:
    to_delete: list[Json] = []
    if kind == "map":
        for item in [*items, *order]:
            if not isinstance(item, dict):
                raise _bad_arg_type(_MAP, item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
        items, to_delete = _extract_to_delete_items(items)
    positions = _Positions(order, merge_key, kind)
    # Upstream's comparator is only inconsistent for items absent from `order`, which a
    # valid patch never produces; those sort last here.
    ranked = sorted(items, key=lambda item: _rank(positions.of(item), len(order)))
    return ranked + to_delete


def _rank(position: int, missing: int) -> int:
    return position if position >= 0 else missing


def _extract_to_delete_items(items: list[Json]) -> tuple[list[Json], list[Json]]:
    kept: list[Json] = []
    deleted: list[Json] = []
    for item in items:
        if not isinstance(item, dict):
            raise _bad_arg_type(_MAP, item)
        is_delete = DIRECTIVE_MARKER in item and item[DIRECTIVE_MARKER] == "delete"
        (deleted if is_delete else kept).append(item)
    return kept, deleted


def _merge_sorted_slices(
    left: list[Json],
    right: list[Json],
    server_order: list[Json],
    merge_key: str,
    kind: _ElementKind,
) -> list[Json]:
    """Insert ``left`` items into ``right`` before the first item that comes later live."""
    positions = _Positions(server_order, merge_key, kind)
    merged: list[Json] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            merged.append(right[j])
            j += 1
        elif j >= len(right):
            merged.append(left[i])
            i += 1
        else:
            left_pos, right_pos = positions.of(left[i]), positions.of(right[j])
            if left_pos >= 0 and right_pos >= 0 and left_pos < right_pos:
                merged.append(left[i])
                i += 1
            else:
                merged.append(right[j])
                j += 1
    return merged


# --- patch values taken as they are -------------------------------------------------------


def _discard_null_values(value: Json) -> None:
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for item in value.values():
            _discard_null_values(item)
    elif isinstance(value, list):
        for item in value:
            _discard_null_values(item)


def _remove_directives(value: Json) -> tuple[Json, bool]:
    """Drop every object carrying ``$patch``; return the value and whether to keep it."""
    if isinstance(value, dict):
        if DIRECTIVE_MARKER in value:
            return None, False
        for key in list(value):
            item, keep = _remove_directives(value[key])
            if keep:
                value[key] = item
            else:
                del value[key]
        return value, True
    if isinstance(value, list):
        kept: list[Json] = []
        for item in value:
            cleaned, keep = _remove_directives(item)
            if keep:
                kept.append(cleaned)
        return kept, True
    return value, True


def _is_directive_key(key: str) -> bool:
    return key in (DIRECTIVE_MARKER, RETAIN_KEYS_DIRECTIVE) or key.startswith(
        (f"{SET_ELEMENT_ORDER_PREFIX}/", f"{DELETE_FROM_PRIMITIVE_LIST_PREFIX}/")
    )


def _strip_directives(value: Json) -> None:
    if isinstance(value, dict):
        for key in [k for k in value if _is_directive_key(k)]:
            del value[key]
        for item in value.values():
            _strip_directives(item)
    elif isinstance(value, list):
        for item in value:
            _strip_directives(item)
