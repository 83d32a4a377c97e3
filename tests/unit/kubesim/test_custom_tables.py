"""The JSONPath subset of custom resources' printer columns, and their cells, as
apiextensions-apiserver's tableconvertor computes them."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.custom_tables import cell, definitions, find

OBJ: dict[str, Any] = {
    "metadata": {"name": "w", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"size": 3, "ratio": 0.5, "on": True, "tags": ["a", "b"], "nested": {"k": "v"}},
    "status": {"conditions": [{"type": "Synced", "status": "False"},
                              {"type": "Ready", "status": "True", "message": "ok"}]},
}  # fmt: skip


@pytest.mark.parametrize(
    ("path", "found"),
    [
        (".spec.size", [3]),
        ("{.spec.size}", [3]),
        (".spec.tags[1]", ["b"]),
        (".spec.tags[-1]", ["b"]),
        (".spec.tags[5]", []),
        (".spec.tags[*]", ["a", "b"]),
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".status.conditions[?(@.type=='Synced')].status", ["False"]),
        ('.status.conditions[?(@.type=="Gone")].status', []),
        (".spec.missing", []),
        (".spec.size.deeper", []),
        ("spec.size", []),  # not a path the subset knows: selects nothing
    ],
)  # fmt: skip
def test_find(path: str, found: list[Any]) -> None:
    assert find(OBJ, path) == found


@pytest.mark.parametrize(
    ("type_", "path", "shown"),
    [
        ("integer", ".spec.size", 3),
        ("integer", ".spec.on", None),  # a bool is no integer
        ("number", ".spec.ratio", 0.5),
        ("boolean", ".spec.on", True),
        ("string", ".spec.size", "3"),
        ("string", ".spec.nested", '{"k":"v"}'),
        ("date", ".metadata.creationTimestamp", "2026-01-01T00:00:00Z"),
        ("string", ".spec.missing", None),
    ],
)  # fmt: skip
def test_cell(type_: str, path: str, shown: Any) -> None:
    assert cell({"type": type_, "jsonPath": path}, OBJ) == shown


def test_definitions_default_to_age_and_describe_their_path() -> None:
    assert [d["name"] for d in definitions(())] == ["Name", "Age"]
    size = definitions(({"name": "Size", "type": "integer", "jsonPath": ".spec.size"},))[1]
    assert (
        size["description"] == "Custom resource definition column (in JSONPath format): .spec.size"
    )
