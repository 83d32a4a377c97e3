"""kube/owners.py: controller references read tolerantly and typed (one rule), and
generateName's base."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.kube.owners import (
    controller_name,
    controller_ref,
    read_controller,
    replicaset_from_pod_name,
)
from graceful_drain.kube.rawjson import FieldReader

RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7c9f8b6d4", "controller": True}
DEPLOYMENT = {**RS, "kind": "Deployment", "name": "web"}
OTHER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"}


def owned(*refs: object) -> dict[str, object]:
    return {"metadata": {"ownerReferences": list(refs)}}


CASES: list[tuple[object, object, str | None, str | None]] = [
    (owned(RS), RS, "web-7c9f8b6d4", None),
    (owned(OTHER, RS), RS, "web-7c9f8b6d4", None),  # the controller, wherever it stands
    (owned({**RS, "controller": False}), None, None, None),  # an owner, not the controller
    (owned({**RS, "controller": "true"}), None, None, None),  # not a boolean: not true
    (owned(DEPLOYMENT), DEPLOYMENT, None, "web"),
    (owned({**RS, "name": 7}), {**RS, "name": 7}, None, None),  # malformed name: none
    (owned("not a reference", RS), RS, "web-7c9f8b6d4", None),
    ({"metadata": {"ownerReferences": "oops"}}, None, None, None),
    ({"metadata": {}}, None, None, None),
    ("not an object", None, None, None),
]


@pytest.mark.parametrize(("obj", "ref", "replicaset", "deployment"), CASES)
def test_controller_of_an_object(
    obj: object, ref: object, replicaset: str | None, deployment: str | None
) -> None:
    assert controller_ref(obj) == ref
    assert controller_name(obj, "ReplicaSet") == replicaset
    assert controller_name(obj, "Deployment") == deployment


@pytest.mark.parametrize(("obj", "ref", "replicaset", "deployment"), CASES)
def test_the_typed_read_finds_the_same_controller(
    obj: object, ref: object, replicaset: str | None, deployment: str | None
) -> None:
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    found = read_controller(FieldReader(), metadata if isinstance(metadata, Mapping) else {})
    assert (found is None) == (ref is None)
    if found is not None:
        assert found.is_a("apps/v1", "ReplicaSet") == (replicaset is not None)
        assert found.is_a("apps/v1", "Deployment") == (deployment is not None)


def test_the_typed_read_records_what_is_malformed_up_to_the_controller() -> None:
    reader = FieldReader()
    refs = ["not a reference", {**OTHER, "controller": "yes"}, {**RS, "name": 7}, 3]
    found = read_controller(reader, {"ownerReferences": refs})
    assert found is not None and found.name == ""
    assert reader.malformed == [
        "metadata.ownerReferences[0]",
        "metadata.ownerReferences[1].controller",
        "metadata.ownerReferences[2].name",
    ]


ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery util/rand, as generateName uses it
bases = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True)


@given(bases, st.text(ALPHANUMS, min_size=5, max_size=5))
def test_a_generated_pod_name_gives_its_replicaset_back(base: str, suffix: str) -> None:
    assert replicaset_from_pod_name(f"{base}-{suffix}") == base


@pytest.mark.parametrize("name", ["web", "web-abcde", "web-1234", "web-bcdfgh", "-bcdfg"])
def test_a_name_generateName_cannot_make_gives_none(name: str) -> None:
    assert replicaset_from_pod_name(name) is None
