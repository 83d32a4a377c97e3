"""The Table of a custom resource, as apiextensions-apiserver's tableconvertor prints it:
Name, then the version's additionalPrinterColumns (Age, from creationTimestamp, when it
declares none), each cell the first result of the column's JSONPath.

The JSONPath subset is what CRDs use: `.field`, `[n]`, `[*]` and `[?(@.key=="value")]`."""

from __future__ import annotations

import json
import re
from typing import Any

from kubesim.types import Obj

from . import printer_columns

AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
              "description": printer_columns.AGE.description}  # fmt: skip
_STEP = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_-]+)"""
    r"""|\[(?P<index>-?\d+|\*)\]"""
    r"""|\[\?\(@\.(?P<key>[A-Za-z0-9_.-]+)\s*==\s*(?P<quote>["'])(?P<value>.*?)(?P=quote)\)\]"""
)


_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "integer": int, "number": (int, float), "boolean": bool, "date": str,
}  # fmt: skip


def columns(declared: tuple[Obj, ...]) -> list[Obj]:
    return list(declared) or [AGE_COLUMN]


def definitions(declared: tuple[Obj, ...]) -> list[Obj]:
    out = [printer_columns.NAME.to_json()]
    for column in columns(declared):
        out.append({"name": column.get("name", ""), "type": column.get("type", ""),
                    "format": column.get("format", ""),
                    "description": column.get("description") or (
                        "Custom resource definition column (in JSONPath format): "
                        + str(column.get("jsonPath", ""))),
                    "priority": int(column.get("priority") or 0)})  # fmt: skip
    return out


def find(document: Any, path: str) -> list[Any]:
    """Every value `path` selects in `document` (an unsupported path selects none)."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    values = [document]
    position = 0
    while position < len(path):
        step = _STEP.match(path, position)
        if step is None:
            return []
        position = step.end()
        values = [found for value in values for found in _step(value, step)]
    return values


def _step(value: Any, step: re.Match[str]) -> list[Any]:
    if step["field"] is not None:
        return [value[step["field"]]] if isinstance(value, dict) and step["field"] in value else []
    if not isinstance(value, list):
        return []
    if step["index"] == "*":
        return list(value)
    if step["index"] is not None:
        index = int(step["index"])
        return [value[index]] if -len(value) <= index < len(value) else []
    return [item for item in value if find(item, "." + step["key"]) == [step["value"]]]


def cell(column: Obj, obj: Obj) -> Any:
    found = find(obj, str(column.get("jsonPath", "")))
    if not found or found[0] is None:
        return None
    value = found[0]
    kind = column.get("type")
    if kind == "string":  # printed by the JSONPath printer: text as is, the rest as JSON
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    expected = _JSON_TYPES.get(str(kind))
    if (
        expected is None
        or not isinstance(value, expected)
        or isinstance(value, bool) != (kind == "boolean")
    ):
        return None
    return value


def cells(declared: tuple[Obj, ...], obj: Obj) -> list[Any]:
    return [obj["metadata"]["name"], *(cell(c, obj) for c in columns(declared))]
