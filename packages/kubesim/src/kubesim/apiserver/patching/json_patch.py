"""JSON patch (RFC 6902) as gopkg.in/evanphx/json-patch.v4 applies it for the API server.

Behaviour kept from that library (v4.12, used by staging/src/k8s.io/apiserver/pkg/endpoints/
handlers/patch.go) where it departs from the RFC:

- array indices are parsed by ``strconv.Atoi``: ``+1`` and ``01`` are accepted, and negative
  indices count from the end (``SupportNegativeIndices`` defaults to true);
- ``replace`` of a missing *object member* adds it (only array indices are checked);
- ``copy`` from a missing object member copies ``null``;
- ``add`` without ``value`` adds ``null``; a ``test`` for ``null`` passes on a missing member;
- the first segment of a path is skipped, so ``a/b`` means ``/b``; the whole document (``""``) can
  only be replaced (with an object or array; any other value is a no-op) or tested.

Errors carry evanphx's text as ``detail``; the HTTP status and message are the API server's.
"""

import contextlib
import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeAlias

from kubesim import jsoncodec
from kubesim.apiserver.gofmt import go_quote
from kubesim.apiserver.patching.errors import (
    PatchBadRequest,
    PatchInternalError,
    PatchInvalid,
    PatchRequestEntityTooLarge,
)
from kubesim.apiserver.patching.gofmt_values import go_json_kind
from kubesim.apiserver.patching.jsontypes import Json, JsonObject

MAX_JSON_PATCH_OPERATIONS = 10000

_MISSING = "missing value"
_INVALID_INDEX = "invalid index referenced"
_TEST_FAILED = "test failed"
# What upstream's Go code panics with on the same input (the server answers 500).
_NIL_DEREFERENCE = "runtime error: invalid memory address or nil pointer dereference"
_ATOI = re.compile(r"[+-]?[0-9]+", re.ASCII)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _OpFailed(Exception):
    """An evanphx error; its text becomes the 422's detail."""


@dataclass
class _Doc:
    root: Json


Container: TypeAlias = JsonObject | list[Json]


def apply_json_patch(doc: Json, patch_ops: Json) -> Json:
    """Return ``doc`` with the RFC 6902 operations ``patch_ops`` applied; inputs are not modified.

    Raises :class:`PatchBadRequest` when ``patch_ops`` is not an array of objects,
    :class:`PatchRequestEntityTooLarge` past 10000 operations, and :class:`PatchInvalid` (422)
    when an operation does not apply, including a failed ``test``.
    """
    operations = _decode_operations(patch_ops)
    state = _Doc(jsoncodec.copy(doc))
    for operation in operations:
        try:
            _apply_operation(state, operation)
        except _OpFailed as failure:
            raise PatchInvalid.generic(str(failure)) from None
    return state.root


def _decode_operations(patch_ops: Json) -> list[JsonObject]:
    if patch_ops is None:
        return []
    if not isinstance(patch_ops, list):
        raise PatchBadRequest(
            f"json: cannot unmarshal {go_json_kind(patch_ops)} "
            "into Go value of type jsonpatch.Patch"
        )
    operations: list[JsonObject] = []
    for operation in patch_ops:
        if operation is None:
            operations.append({})
        elif isinstance(operation, dict):
            operations.append(operation)
        else:
            raise PatchBadRequest(
                f"json: cannot unmarshal {go_json_kind(operation)} "
                "into Go value of type jsonpatch.Operation"
            )
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchRequestEntityTooLarge(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
            f"got {len(operations)}"
        )
    return operations


def _apply_operation(state: _Doc, operation: JsonObject) -> None:
    kind = operation.get("op")
    handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
    if handler is None:
        shown = kind if isinstance(kind, str) else "unknown"
        raise _OpFailed(f"Unexpected kind: {shown}")
    handler(state, operation)


def _string_field(operation: JsonObject, name: str, missing: str) -> str:
    value = operation.get(name)
    if value is None:
        raise _OpFailed(f"{missing}: {_MISSING}")
    if not isinstance(value, str):
        raise _OpFailed(
            f"json: cannot unmarshal {go_json_kind(value)} into Go value of type string"
        )
    return value


def _path(operation: JsonObject, verb: str, *, keep_cause: bool) -> str:
    # add, remove and copy discard the decode error's text; the others wrap it.
    try:
        return _string_field(operation, "path", "operation missing path field")
    except _OpFailed as cause:
        if keep_cause:
            raise _OpFailed(f"{verb} operation failed to decode path: {cause}") from None
        raise _OpFailed(f"{verb} operation failed to decode path: {_MISSING}") from None


def _from(operation: JsonObject, verb: str) -> str:
    try:
        return _string_field(operation, "from", "operation, missing from field")
    except _OpFailed as cause:
        raise _OpFailed(f"{verb} operation failed to decode from: {cause}") from None


def _decode_token(token: str) -> str:
    return re.sub("~[01]", lambda m: "/" if m.group() == "~1" else "~", token)


def _find_container(state: _Doc, path: str) -> tuple[Container, str] | None:
    tokens = path.split("/")
    if len(tokens) < 2:
        return None
    node = state.root
    for token in tokens[1:-1]:
        if isinstance(node, dict):
            child = node.get(_decode_token(token))
        elif isinstance(node, list):
            try:
                child = _list_get(node, _decode_token(token))
            except _OpFailed:
                return None
        else:
            return None
        if not isinstance(child, dict | list):
            return None
        node = child
    if not isinstance(node, dict | list):
        return None
    return node, _decode_token(tokens[-1])


def _located(state: _Doc, path: str, missing: str) -> tuple[Container, str]:
    """`_find_container`, or evanphx's "missing value" error introduced by `missing`."""
    found = _find_container(state, path)
    if found is None:
        raise _OpFailed(f"{missing}: {_MISSING}")
    return found


@contextlib.contextmanager
def _failing_as(context: str) -> Iterator[None]:
    """An evanphx error raised inside is wrapped as upstream wraps it: `context: error`."""
    try:
        yield
    except _OpFailed as cause:
        raise _OpFailed(f"{context}: {cause}") from None


def _atoi(key: str) -> int:
    if _ATOI.fullmatch(key) is None:
        raise _OpFailed(f"strconv.Atoi: parsing {go_quote(key)}: invalid syntax")
    index = int(key)
    if not _INT64_MIN <= index <= _INT64_MAX:
        raise _OpFailed(f"strconv.Atoi: parsing {go_quote(key)}: value out of range")
    return index


def _invalid_index(index: int) -> _OpFailed:
    return _OpFailed(f"Unable to access invalid index: {index}: {_INVALID_INDEX}")


def _list_get(items: list[Json], key: str) -> Json:
    index = _atoi(key)
    if index < 0:
        if index < -len(items):
            raise _invalid_index(index)
        index += len(items)
    if index >= len(items):
        raise _invalid_index(index)
    return items[index]


def _container_get(container: Container, key: str) -> Json:
    if isinstance(container, dict):
        return container.get(key)
    return _list_get(container, key)


def _container_add(container: Container, key: str, value: Json) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    try:
        index = _atoi(key)
    except _OpFailed as cause:
        raise _OpFailed(f"value was not a proper array index: '{key}': {cause}") from None
    size = len(container) + 1
    if index >= size:
        raise _invalid_index(index)
    if index < 0:
        if index < -size:
            raise _invalid_index(index)
        index += size
    container.insert(index, value)


def _container_remove(container: Container, key: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise _OpFailed(f"Unable to remove nonexistent key: {key}: {_MISSING}")
        del container[key]
        return
    index = _atoi(key)
    if index >= len(container):
        raise _invalid_index(index)
    if index < 0:
        if index < -len(container):
            raise _invalid_index(index)
        index += len(container)
    del container[index]


def _container_set(container: Container, key: str, value: Json) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    index = _atoi(key)
    if index < 0:
        index += len(container)
    container[index] = value


def _op_add(state: _Doc, operation: JsonObject) -> None:
    path = _path(operation, "add", keep_cause=False)
    found = _located(state, path, f'add operation does not apply: doc is missing path: "{path}"')
    with _failing_as(f"error in add for path: '{path}'"):
        _container_add(*found, copy.deepcopy(operation.get("value")))


def _op_remove(state: _Doc, operation: JsonObject) -> None:
    path = _path(operation, "remove", keep_cause=False)
    found = _located(state, path, f'remove operation does not apply: doc is missing path: "{path}"')
    with _failing_as(f"error in remove for path: '{path}'"):
        _container_remove(*found)


def _op_replace(state: _Doc, operation: JsonObject) -> None:
    path = _path(operation, "replace", keep_cause=True)
    value = copy.deepcopy(operation.get("value"))
    if path == "":
        if "value" not in operation:
            raise PatchInternalError(_NIL_DEREFERENCE)
        if isinstance(value, dict | list):
            state.root = value
        return
    container, key = _located(
        state, path, f"replace operation does not apply: doc is missing path: {path}"
    )
    try:
        _container_get(container, key)
    except _OpFailed:
        raise _OpFailed(
            f"replace operation does not apply: doc is missing key: {path}: {_MISSING}"
        ) from None
    _container_set(container, key, value)


def _op_move(state: _Doc, operation: JsonObject) -> None:
    source = _from(operation, "move")
    container, key = _located(
        state, source, f"move operation does not apply: doc is missing from path: {source}"
    )
    with _failing_as(f"error in move for path: '{key}'"):
        value = _container_get(container, key)
        _container_remove(container, key)
    path = _path(operation, "move", keep_cause=True)
    found = _located(
        state, path, f"move operation does not apply: doc is missing destination path: {path}"
    )
    with _failing_as(f"error in move for path: '{path}'"):
        _container_add(*found, value)


def _op_copy(state: _Doc, operation: JsonObject) -> None:
    source = _from(operation, "copy")
    found = _located(
        state, source, f"copy operation does not apply: doc is missing from path: {source}"
    )
    with _failing_as(f"error in copy for from: '{source}'"):
        value = copy.deepcopy(_container_get(*found))
    path = _path(operation, "copy", keep_cause=False)
    found = _located(
        state, path, f"copy operation does not apply: doc is missing destination path: {path}"
    )
    with _failing_as("error while adding value during copy"):
        _container_add(*found, value)


def _op_test(state: _Doc, operation: JsonObject) -> None:
    path = _path(operation, "test", keep_cause=True)
    failed = _OpFailed(f"testing value {path} failed: {_TEST_FAILED}")
    if path == "":
        if not _json_equal(state.root, operation.get("value")):
            raise failed
        return
    found = _located(state, path, f"test operation does not apply: is missing path: {path}")
    with _failing_as(f"error in test for path: '{path}'"):
        actual = _container_get(*found)
    if "value" not in operation:
        raise failed
    expected = operation["value"]
    if actual is None:
        if expected is not None:
            raise failed
        return
    if not _json_equal(actual, expected):
        raise failed


def _json_equal(actual: Json, expected: Json) -> bool:
    """evanphx's structural equality: objects by members, arrays in order, scalars by type."""
    if isinstance(actual, dict):
        if not isinstance(expected, dict) or len(actual) != len(expected):
            return False
        for key, value in actual.items():
            if key not in expected:
                return False
            other = expected[key]
            if (value is None) != (other is None):
                return False
            if value is not None and not _json_equal(value, other):
                return False
        return True
    if isinstance(actual, list):
        if not isinstance(expected, list) or len(actual) != len(expected):
            return False
        return all(_json_equal(a, b) for a, b in zip(actual, expected, strict=True))
    # Upstream compares the compacted JSON text of scalars: 1 and 1.0 differ, so do
    # true and 1; comparing Python type and value gives the same answer.
    return type(actual) is type(expected) and actual == expected


_HANDLERS: dict[str, Callable[[_Doc, JsonObject], None]] = {
    "add": _op_add,
    "remove": _op_remove,
    "replace": _op_replace,
    "move": _op_move,
    "copy": _op_copy,
    "test": _op_test,
}
