"""Paginated lists over the store's ordered index: pages add up to the whole list, in etcd key
order ("namespace/name"), namespaces as key ranges, continue keys by bisection."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.query import match_everything
from kubesim.apiserver.server import list_page
from kubesim.apiserver.store import ObjectStore, storage_order_key
from kubesim.types import Obj

PODS = ("", "pods")


def pod(namespace: str, name: str, app: str = "web") -> Obj:
    return {"metadata": {"namespace": namespace, "name": name, "labels": {"app": app},
                         "resourceVersion": "1"}}  # fmt: skip


def store_of(objects: list[Obj]) -> ObjectStore:
    store = ObjectStore()
    for obj in objects:
        store.put(PODS, obj)
    return store


def names(objects: list[Obj]) -> list[str]:
    return [storage_order_key(obj) for obj in objects]


def is_db(obj: Obj) -> bool:
    return bool(obj["metadata"]["labels"]["app"] == "db")


def all_pages(
    store: ObjectStore, namespace: str | None, limit: int, predicate: object
) -> list[Obj]:
    collected: list[Obj] = []
    after = None
    for _ in range(1000):
        page, remaining = list_page(store.ordered(PODS), namespace, predicate, after, limit)  # type: ignore[arg-type]
        collected += page
        if not remaining:
            return collected
        assert len(page) == limit
        after = storage_order_key(page[-1])
    raise AssertionError("pagination did not end")


# "kube" and "kube-system": "/" sorts after "-", as in etcd's key order.
OBJECTS = [pod("kube-system", "dns"), pod("kube", "a"), pod("kube", "b", "db"),
           pod("default", "x", "db"), pod("kube0", "z"), pod("kube", "c")]  # fmt: skip


@pytest.mark.parametrize(
    ("namespace", "after", "limit", "predicate", "page", "remaining"),
    [
        (None, None, 0, match_everything,
         ["default/x", "kube-system/dns", "kube/a", "kube/b", "kube/c", "kube0/z"], 0),
        (None, None, 2, match_everything, ["default/x", "kube-system/dns"], 4),
        (None, "kube-system/dns", 2, match_everything, ["kube/a", "kube/b"], 2),
        ("kube", None, 2, match_everything, ["kube/a", "kube/b"], 1),
        ("kube", "kube/b", 2, match_everything, ["kube/c"], 0),
        ("kube", None, 0, match_everything, ["kube/a", "kube/b", "kube/c"], 0),
        ("missing", None, 5, match_everything, [], 0),
        (None, None, 1, is_db, ["default/x"], 1),
        ("kube", None, 5, is_db, ["kube/b"], 0),
        (None, "kube0/z", 3, match_everything, [], 0),
    ],
)  # fmt: skip
def test_list_page(namespace: str | None, after: str | None, limit: int, predicate: object,
                   page: list[str], remaining: int) -> None:  # fmt: skip
    found, left = list_page(store_of(OBJECTS).ordered(PODS), namespace, predicate, after, limit)  # type: ignore[arg-type]
    assert (names(found), left) == (page, remaining)


keys = st.tuples(st.sampled_from(["a", "a-b", "a.b", "ab", "b", "kube", "kube-system"]),
                 st.text("ab-.0", min_size=1, max_size=4))  # fmt: skip


@given(st.lists(keys, unique=True, max_size=40), st.integers(min_value=1, max_value=7),
       st.sampled_from([None, "a", "a-b", "kube"]), st.booleans())  # fmt: skip
def test_pages_add_up_to_the_whole_filtered_list(
    pairs: list[tuple[str, str]], limit: int, namespace: str | None, only_db: bool
) -> None:
    objects = [pod(ns, name, "db" if i % 3 == 0 else "web") for i, (ns, name) in enumerate(pairs)]
    store = store_of(objects)
    predicate = is_db if only_db else match_everything
    expected = sorted(
        (o for o in objects
         if (namespace is None or o["metadata"]["namespace"] == namespace) and predicate(o)),
        key=storage_order_key,
    )  # fmt: skip
    assert names(all_pages(store, namespace, limit, predicate)) == names(expected)


def test_a_write_refreshes_the_ordered_index() -> None:
    store = store_of(OBJECTS[:2])
    assert names(store.ordered(PODS).objects) == ["kube-system/dns", "kube/a"]
    store.put(PODS, pod("default", "new"))
    assert names(store.ordered(PODS).objects) == ["default/new", "kube-system/dns", "kube/a"]
    store.remove(PODS, OBJECTS[1])
    assert names(store.ordered(PODS).objects) == ["default/new", "kube-system/dns"]
