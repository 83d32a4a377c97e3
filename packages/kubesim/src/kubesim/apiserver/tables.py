"""Server-side printing: the `meta.k8s.io/v1` Table kubectl asks for with `as=Table`.

Pods, Deployments, ReplicaSets, Nodes and HorizontalPodAutoscalers get the columns and cells of
pkg/printers/internalversion/printers.go (:mod:`.printer_columns`, :mod:`.printers`); every
other built-in resource the generic Name and Created At of the default table convertor;
custom resources their CRD's columns (:mod:`.custom_tables`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from aiohttp import web

from kubesim.types import Obj

from . import custom_tables, printer_columns, printers
from .resources import ResourceType

Printer = Callable[[Obj, datetime], printers.Row]

PRINTERS: dict[tuple[str, str], tuple[tuple[printer_columns.ColumnDefinition, ...], Printer]] = {
    ("", "Pod"): (printer_columns.POD, printers.print_pod),
    ("", "Node"): (printer_columns.NODE, printers.print_node),
    ("apps", "Deployment"): (printer_columns.DEPLOYMENT, printers.print_deployment),
    ("apps", "ReplicaSet"): (printer_columns.REPLICA_SET, printers.print_replica_set),
    ("autoscaling", "HorizontalPodAutoscaler"): (
        printer_columns.HORIZONTAL_POD_AUTOSCALER,
        printers.print_horizontal_pod_autoscaler,
    ),
}
GENERIC = (printer_columns.GENERIC, printers.print_generic)


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
    request: web.BaseRequest,
    include_columns: bool = True,
) -> Obj:
    columns, printer = PRINTERS.get((rt.group, rt.kind), GENERIC)
    custom = rt.printer_columns
    if custom is not None:
        printer = lambda obj, now: printers.Row(custom_tables.cells(custom, obj))  # noqa: E731
    include = request.query.get("includeObject", "Metadata")
    now = datetime.now(UTC)
    rows = []
    for obj in objects:
        printed = printer(obj, now)
        row: Obj = {"cells": printed.cells}
        if printed.conditions:
            row["conditions"] = printed.conditions
        if include == "Object":
            row["object"] = obj
        elif include == "None":
            # TableRow.object is a RawExtension: `omitempty` leaves it in, as null.
            row["object"] = None
        else:
            row["object"] = _partial(obj)
        rows.append(row)
    table: Obj = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [],
        "rows": rows,
    }
    if include_columns and custom is not None:
        table["columnDefinitions"] = custom_tables.definitions(custom)
    elif include_columns:
        table["columnDefinitions"] = [column.to_json() for column in columns]
    return table
