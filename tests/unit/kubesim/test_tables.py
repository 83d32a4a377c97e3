"""The Table kubectl gets with `as=Table` (pure but for a mocked request): which printer
serves a kind, and what each `includeObject` puts in a row."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from kubesim.apiserver import printer_columns
from kubesim.apiserver.resources import RESOURCE_TYPES, ResourceType
from kubesim.apiserver.tables import to_table, wants_table

Obj = dict[str, Any]
META = {"name": "x", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}


def resource(kind: str) -> ResourceType:
    return next(rt for rt in RESOURCE_TYPES if rt.kind == kind)


def table(kind: str, query: str = "", include_columns: bool = True) -> Obj:
    request = make_mocked_request("GET", f"/x{query}")
    obj = {"metadata": dict(META), "spec": {}, "status": {}}
    return to_table(resource(kind), [obj], "7", request, include_columns)


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        ("Pod", printer_columns.POD),
        ("Node", printer_columns.NODE),
        ("Deployment", printer_columns.DEPLOYMENT),
        ("ReplicaSet", printer_columns.REPLICA_SET),
        ("ConfigMap", printer_columns.CONFIG_MAP),
        ("Namespace", printer_columns.NAMESPACE),
        ("Role", printer_columns.GENERIC),
        ("CustomResourceDefinition", printer_columns.GENERIC),
    ],
)
def test_columns_per_kind(kind: str, columns: tuple[printer_columns.ColumnDefinition, ...]) -> None:
    served = table(kind)
    assert [c["name"] for c in served["columnDefinitions"]] == [c.name for c in columns]
    assert len(served["rows"][0]["cells"]) == len(columns)
    assert served["metadata"] == {"resourceVersion": "7"}


@pytest.mark.parametrize(
    ("query", "object_"),
    [
        ("", {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": META}),
        ("?includeObject=Metadata",
         {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": META}),
        ("?includeObject=Object", {"metadata": META, "spec": {}, "status": {}}),
        ("?includeObject=None", None),
    ],
)  # fmt: skip
def test_include_object(query: str, object_: Obj | None) -> None:
    assert table("ConfigMap", query)["rows"][0]["object"] == object_


def test_rows_only_when_columns_are_not_wanted() -> None:
    assert table("Pod", include_columns=False)["columnDefinitions"] == []


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", True),
        ("application/json", False),
        ("application/vnd.kubernetes.protobuf, application/json", False),
    ],
)
def test_wants_table(accept: str, wanted: bool) -> None:
    assert wants_table(accept) is wanted


@pytest.mark.parametrize(
    "rt", [rt for rt in RESOURCE_TYPES if not rt.virtual], ids=lambda rt: rt.group_resource
)
def test_every_served_kind_prints_a_cell_per_column(rt: ResourceType) -> None:
    """A bare object of each kind kubesim serves (list/get-able) prints one cell per column,
    whatever fields it lacks."""
    request = make_mocked_request("GET", "/x")
    served = to_table(rt, [{"metadata": dict(META)}], "7", request)
    assert len(served["rows"][0]["cells"]) == len(served["columnDefinitions"])
