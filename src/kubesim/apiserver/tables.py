"""Server-side printing: the `meta.k8s.io/v1` Table kubectl asks for with `as=Table`.

Every resource gets the generic columns (Name, Created At) as the real
server's default table convertor gives them; `COLUMNS` adds the per-kind
columns of pkg/printers/internalversion/printers.go where kubectl users see them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from .resources import ResourceType

Obj = dict[str, Any]
Column = tuple[str, str, str, Callable[[Obj], Any]]  # name, type, format, cell

_NAME: Column = ("Name", "string", "name", lambda o: o["metadata"]["name"])
_CREATED: Column = ("Created At", "date", "", lambda o: o["metadata"].get("creationTimestamp"))

COLUMNS: dict[tuple[str, str], list[Column]] = {}


def wants_table(accept: str) -> bool:
    for part in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in part.split(";")[1:] if "=" in p)
        if params.get("as") == "Table":
            return True
    return False


def _partial(obj: Obj) -> Obj:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def to_table(
    rt: ResourceType,
    objects: list[Obj],
    resource_version: str,
    request: web.Request,
    include_columns: bool = True,
) -> Obj:
    columns = COLUMNS.get((rt.group, rt.kind), [_NAME, _CREATED])
    include = request.query.get("includeObject", "Metadata")
    rows = []
    for obj in objects:
        row: Obj = {"cells": [cell(obj) for _, _, _, cell in columns]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = _partial(obj)
        rows.append(row)
    table: Obj = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [],
        "rows": rows,
    }
    if include_columns:
        table["columnDefinitions"] = [
            {"name": name, "type": type_, "format": fmt, "description": "", "priority": 0}
            for name, type_, fmt, _ in columns
        ]
    return table
