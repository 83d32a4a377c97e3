"""The typed fast path for listed pods: whenever it answers, it answers what the informer's
tolerant path (decode to dicts, key, PodInfo.from_object) gives; the usual pod takes it."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
from bench import objects
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.controller.decision.model import PodInfo
from graceful_drain.kube.client import decode
from graceful_drain.kube.informer import Key, _key_of

SKIPPED = "skipped"  # the informer skips the object (no key, or the transform refused it)


def tolerant(raw: bytes) -> tuple[Key, PodInfo] | str:
    """What the informer keeps for `raw` without a fast path."""
    document = decode(raw)
    key = _key_of(document)
    if key is None:
        return SKIPPED
    try:
        return key, PodInfo.from_object(document)
    except Exception:
        return SKIPPED


def same_answer(raw: bytes) -> None:
    fast = PodInfo.from_listed(raw)
    if fast is not None:
        assert fast == tolerant(raw)


def usual_pods() -> list[dict[str, Any]]:
    pods = [
        objects.pod(1, namespace="shop", name="web-1", replicaset="web-5d9"),
        objects.pod(2, namespace="shop", name="web-2", replicaset="web-5d9", ready=False),
        objects.pod(3, namespace="shop", name="web-3", replicaset="web-5d9", terminating=True),
        objects.pod(4, namespace="shop", name="bare", replicaset=None),
    ]
    job = copy.deepcopy(pods[0])
    job["metadata"]["name"] = "job-1"
    job["metadata"]["ownerReferences"][0].update(apiVersion="batch/v1", kind="Job")
    pending = copy.deepcopy(pods[3])
    pending["metadata"]["name"] = "pending"
    del pending["spec"]["nodeName"]
    pending["status"] = {"phase": "Pending"}
    return [*pods, job, pending]


def test_the_usual_pods_take_the_fast_path() -> None:
    """Else the comparisons below would compare the tolerant path with nothing."""
    for pod in usual_pods():
        raw = json.dumps(pod).encode()
        fast = PodInfo.from_listed(raw)
        assert fast is not None, pod["metadata"]["name"]
        assert fast == tolerant(raw)
    infos = {}
    for pod in usual_pods():
        fast = PodInfo.from_listed(json.dumps(pod).encode())
        assert fast is not None
        infos[fast[1].name] = fast[1]
    assert infos["web-1"].owner_replicaset == "web-5d9" and infos["web-1"].ready
    assert not infos["web-2"].ready
    assert infos["web-3"].terminating
    assert infos["bare"].owner_kind is None
    assert infos["job-1"].owner_kind == "Job" and infos["job-1"].owner_replicaset is None
    assert infos["pending"].node_name == "" and infos["pending"].phase == "Pending"


# Where a mutation may land: every field either path reads, their parents, and neighbours.
PATHS: tuple[tuple[str | int, ...], ...] = (
    (),
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "uid"),
    ("metadata", "deletionTimestamp"),
    ("metadata", "labels"),
    ("metadata", "ownerReferences"),
    ("metadata", "ownerReferences", 0),
    ("metadata", "ownerReferences", 0, "apiVersion"),
    ("metadata", "ownerReferences", 0, "kind"),
    ("metadata", "ownerReferences", 0, "name"),
    ("metadata", "ownerReferences", 0, "controller"),
    ("metadata", "ownerReferences", 1),
    ("metadata", "ownerReferences", 1, "controller"),
    ("spec",),
    ("spec", "nodeName"),
    ("spec", "containers"),
    ("status",),
    ("status", "phase"),
    ("status", "conditions"),
    ("status", "conditions", 0),
    ("status", "conditions", 0, "type"),
    ("status", "conditions", 0, "status"),
    ("status", "conditions", 1, "type"),
    ("status", "conditions", 1, "status"),
    ("status", "conditions", 2, "type"),
    ("status", "conditions", 2, "status"),
    ("status", "conditions", 4),
)
DELETE = object()
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.sampled_from(["", "Ready", "True", "False", "apps/v1", "ReplicaSet", "web-5d9", "é"]),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["type", "status", "controller", "kind", "x"]), inner),
    ),
    max_leaves=6,
)
mutations = st.lists(
    st.tuples(st.sampled_from(PATHS), st.one_of(st.just(DELETE), values)), max_size=4
)


def mutated(base: dict[str, Any], changes: list[tuple[tuple[Any, ...], Any]]) -> Any:
    document: Any = copy.deepcopy(base)
    for path, value in changes:
        if not path:
            document = None if value is DELETE else value
            continue
        parent: Any = document
        for key in path[:-1]:
            if isinstance(parent, dict):
                parent = parent.get(key)
            elif isinstance(parent, list) and isinstance(key, int) and key < len(parent):
                parent = parent[key]
            else:
                parent = None
        last = path[-1]
        if isinstance(parent, dict):
            if value is DELETE:
                parent.pop(last, None)
            else:
                parent[last] = value
        elif isinstance(parent, list) and isinstance(last, int) and last < len(parent):
            if value is DELETE:
                del parent[last]
            else:
                parent[last] = value
    return document


@given(st.sampled_from(range(len(usual_pods()))), mutations)
def test_mutated_pods(which: int, changes: list[tuple[tuple[Any, ...], Any]]) -> None:
    same_answer(json.dumps(mutated(usual_pods()[which], changes)).encode())


def with_second(pod: dict[str, Any], field: str, entry: dict[str, Any]) -> str:
    """`pod` with `entry` appended to its ownerReferences or conditions."""
    changed = copy.deepcopy(pod)
    parent = changed["metadata" if field == "ownerReferences" else "status"]
    parent[field] = [*parent[field], entry]
    return json.dumps(changed)


EDGE_BODIES = {
    "second Ready condition": with_second(
        usual_pods()[0], "conditions", {"type": "Ready", "status": "False"}
    ),
    "second controller": with_second(
        usual_pods()[0],
        "ownerReferences",
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": True},
    ),
    "duplicate name": json.dumps(usual_pods()[0]).replace('"name": ', '"name": 1, "name": ', 1),
    "duplicate metadata": '{"metadata": {"name": "x"}, ' + json.dumps(usual_pods()[0])[1:],
    "null metadata": '{"metadata": null}',
    "no metadata": '{"spec": {}}',
    "empty name": '{"metadata": {"name": ""}}',
    "null name": '{"metadata": {"name": null, "namespace": "a"}}',
    "a list": "[1, 2]",
    "null": "null",
    "long integer elsewhere": json.dumps(usual_pods()[0])[:-1] + ', "x": ' + "1" * 30 + "}",
    "non-ASCII": json.dumps(usual_pods()[0] | {"x": "日本"}, ensure_ascii=False),
}


@pytest.mark.parametrize("name", sorted(EDGE_BODIES))
def test_edge_bodies(name: str) -> None:
    same_answer(EDGE_BODIES[name].encode())


def test_it_reads_a_list_items_raw_bytes() -> None:
    """The informer hands it msgspec.Raw, as RawApi.list_page leaves the items."""
    page = msgspec.json.encode({"items": usual_pods()})
    items = msgspec.json.decode(page, type=dict[str, list[msgspec.Raw]])["items"]
    assert [PodInfo.from_listed(item) for item in items] == [
        tolerant(bytes(item)) for item in items
    ]
