"""Field ownership and server-side apply (managed_fields.py): which fields a write gives its
manager, what an apply merges, removes and refuses. The same behaviour is compared with
kube-apiserver in tests/e2e/differential (interactions_api.py, test_kubectl_api.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver import managed_fields
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.managed_fields import (
    Manager,
    apply,
    decode,
    encode,
    fields,
    owners,
    track_update,
)

Obj = dict[str, Any]
NOW = "2026-01-01T00:00:00Z"
ALICE = Manager("alice", "Apply", "v1")
BOB = Manager("bob", "Apply", "v1")
CAROL = Manager("carol", "Update", "v1")


def cm(**data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": {"tier": "a"}}, "data": data}  # fmt: skip


def applied_by(manager: Manager, current: Obj, config: Obj, force: bool = False) -> Obj:
    result = apply(current, config, manager, force, NOW)
    obj = result.obj
    obj["metadata"]["managedFields"] = [
        {"manager": m.name, "operation": m.operation, "apiVersion": m.api_version,
         "time": NOW, "fieldsType": "FieldsV1", "fieldsV1": encode(p)}
        for m, p in result.owned.items() if p
    ]  # fmt: skip
    return obj


def owned_names(obj: Obj) -> dict[str, list[str]]:
    return {m.name: sorted("/".join(n for _, n in p) for p in paths)
            for m, paths in owners(obj).items()}  # fmt: skip


def test_fields_of_a_pod_template_key_lists_and_leave_out_server_metadata() -> None:
    deployment = {"metadata": {"name": "d", "uid": "u", "labels": {"a": "1"}},
                  "spec": {"template": {"spec": {"containers": [
                      {"name": "web", "image": "i", "ports": [{"containerPort": 80}]}]}}},
                  "status": {"replicas": 1}}  # fmt: skip
    found = {"/".join(f"{k}:{n}" for k, n in path) for path in fields(deployment)}
    item = 'f:spec/f:template/f:spec/f:containers/k:{"name":"web"}'
    assert found == {
        "f:metadata/f:labels/f:a", item, f"{item}/f:name", f"{item}/f:image",
        f'{item}/f:ports/k:{{"containerPort":80,"protocol":"TCP"}}',
        f'{item}/f:ports/k:{{"containerPort":80,"protocol":"TCP"}}/f:containerPort',
    }  # fmt: skip


def test_fields_v1_round_trips() -> None:
    paths = set(fields({"spec": {"containers": [{"name": "a", "image": "x"}]},
                        "data": {"k": "v"}}))  # fmt: skip
    assert decode(encode(paths)) == paths
    assert encode({(("f", "data"), ("f", "k"))}) == {"f:data": {"f:k": {}}}
    # a field that is in the set and holds fields of it carries ".", as fieldpath.Set writes it
    both = {(("f", "data"),), (("f", "data"), ("f", "k"))}
    assert encode(both) == {"f:data": {"f:k": {}, ".": {}}}
    assert decode(encode(both)) == both


def test_a_conflicting_apply_is_refused_unless_forced() -> None:
    first = applied_by(ALICE, {"metadata": {"name": "cm"}}, cm(a="1"))
    with pytest.raises(ApiError) as refused:
        apply(first, cm(a="2"), BOB, False, NOW)
    assert refused.value.code == 409
    assert refused.value.message == 'Apply failed with 1 conflict: conflict with "alice": .data.a'
    assert refused.value.details == {"causes": [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".data.a"}
    ]}  # fmt: skip
    forced = applied_by(BOB, first, cm(a="2"), force=True)
    assert forced["data"] == {"a": "2"}
    assert owned_names(forced) == {"alice": ["metadata/labels/tier"],
                                   "bob": ["data/a", "metadata/labels/tier"]}  # fmt: skip


def test_an_update_manager_is_named_with_its_api_version() -> None:
    first = applied_by(ALICE, {"metadata": {"name": "cm"}}, cm(a="1"))
    changed = {**first, "data": {"a": "2"}}
    track_update(first, changed, CAROL, NOW)
    with pytest.raises(ApiError) as refused:
        apply(changed, cm(a="3"), ALICE, False, NOW)
    assert refused.value.message == (
        'Apply failed with 1 conflict: conflict with "carol" using v1: .data.a'
    )


def test_several_conflicts_are_listed_by_manager() -> None:
    first = applied_by(ALICE, {"metadata": {"name": "cm"}}, cm(a="1", b="1"))
    with pytest.raises(ApiError) as refused:
        apply(first, cm(a="2", b="2"), BOB, False, NOW)
    assert refused.value.message == (
        'Apply failed with 2 conflicts: conflicts with "alice":\n- .data.a\n- .data.b'
    )


def test_same_values_are_shared_and_a_field_given_up_goes_only_when_nobody_owns_it() -> None:
    first = applied_by(ALICE, {"metadata": {"name": "cm"}}, cm(a="1", b="2"))
    shared = applied_by(BOB, first, cm(a="1"))
    alice_gives_up = applied_by(ALICE, shared, cm())
    assert alice_gives_up["data"] == {"a": "1"}  # bob still owns a; nobody owns b
    assert owned_names(alice_gives_up)["bob"] == ["data/a", "metadata/labels/tier"]


def test_list_items_merge_by_key_and_go_when_given_up() -> None:
    def svc(*ports: int) -> Obj:
        return {"spec": {"ports": [{"port": p, "name": f"p{p}"} for p in ports]}}

    base = {"metadata": {"name": "s"}, "spec": {"ports": []}}
    first = applied_by(ALICE, base, svc(80))
    both = applied_by(BOB, first, svc(443))
    assert [p["port"] for p in both["spec"]["ports"]] == [80, 443]
    left = applied_by(ALICE, both, svc())
    assert [p["port"] for p in left["spec"]["ports"]] == [443]


def test_update_gives_changed_fields_to_its_manager_and_drops_removed_ones() -> None:
    old = cm(a="1", b="2")
    track_update(None, old, CAROL, NOW)
    assert owned_names(old) == {"carol": ["data/a", "data/b", "metadata/labels/tier"]}
    dave = Manager("dave", "Update", "v1")
    new = {**old, "data": {"a": "9"}}
    track_update(old, new, dave, NOW)
    assert owned_names(new) == {"carol": ["metadata/labels/tier"], "dave": ["data/a"]}


@pytest.mark.parametrize(
    ("obj", "paths"),
    [
        ({"spec": {"selector": {"matchLabels": {"a": "1"}}}}, {"f:spec/f:selector"}),
        ({"spec": {"selector": {"app": "web"}}}, {"f:spec/f:selector"}),
        ({"webhooks": [{"name": "w", "namespaceSelector": {"matchLabels": {"a": "1"}}}]},
         {'f:webhooks/k:{"name":"w"}', 'f:webhooks/k:{"name":"w"}/f:name',
          'f:webhooks/k:{"name":"w"}/f:namespaceSelector'}),
        ({"spec": {"nodeSelector": {"zone": "a"}}}, {"f:spec/f:nodeSelector/f:zone"}),
        ({"spec": {"args": ["a", "b"]}}, {"f:spec/f:args"}),
    ],
)  # fmt: skip
def test_atomic_maps_and_lists_are_one_field(obj: Obj, paths: set[str]) -> None:
    assert {"/".join(f"{k}:{n}" for k, n in p) for p in fields(obj)} == paths


# --- track_update's walk over differences, against the flattening it replaces -------------

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kubesim.apiserver.managed_fields import _changes, entries  # noqa: E402
from kubesim.apiserver.managed_fields import _times as times_of  # noqa: E402

# Field names that change how values are flattened (associative lists, atomic maps, owned
# metadata) beside plain ones; few values, so that before and after often share subtrees.
NAMES = ("a", "b", "containers", "conditions", "ports", "selector", "labels", "name", "type",
         "port", "protocol", "status", "spec")  # fmt: skip
SCALARS = st.sampled_from([None, 0, 1, True, "x", "y", 1.0])
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(NAMES), children, max_size=3),
        *(
            st.lists(  # an associative list's items (by name, or a condition's type)
                st.fixed_dictionaries(
                    {key: st.sampled_from(["p", "q", "r"])},
                    optional={"port": SCALARS, "a": children, "status": SCALARS},
                ),
                max_size=3,
            )
            for key in ("name", "type")
        ),
    ),
    max_leaves=12,
)
OBJECTS = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries(
        {}, optional={"labels": st.dictionaries(st.sampled_from(["x", "y"]), SCALARS),
                      "finalizers": st.lists(st.sampled_from(["f", "g"]), max_size=2)})},
    optional={"spec": VALUES, "status": VALUES, "data": VALUES},
)  # fmt: skip


def flattened_changes(before: Obj, after: Obj, subresource: str) -> tuple[set[Any], set[Any]]:
    old, new = fields(before, subresource), fields(after, subresource)
    changed = {p for p, v in new.items() if p not in old or old[p] != v}
    return changed, set(old) - set(new)


def track_update_flattened(current: Obj | None, new: Obj, manager: Manager, now: str) -> None:
    """track_update as it was: both objects flattened, managedFields decoded every time."""
    owned = owners(current)
    before = fields(current, manager.subresource) if current is not None else {}
    after = fields(new, manager.subresource)
    changed = {p for p, v in after.items() if p not in before or before[p] != v}
    removed = set(before) - set(after)
    for paths in owned.values():
        paths -= changed | removed
    times = times_of(current)
    if changed:
        owned.setdefault(manager, set()).update(changed)
        times[manager] = now
    new["metadata"]["managedFields"] = entries(owned, times)


@settings(max_examples=400)
@given(OBJECTS, OBJECTS, st.sampled_from(["", "status"]))
def test_changes_walk_finds_what_flattening_finds(before: Obj, after: Obj, sub: str) -> None:
    assert _changes(before, after, sub) == flattened_changes(before, after, sub)
    assert _changes(after, after, sub) == (set(), set())


@given(st.lists(st.tuples(OBJECTS, st.sampled_from(["", "status"])), min_size=1, max_size=3))
def test_fields_v1_round_trips_the_fields_of_several_objects(objs: list[Any]) -> None:
    """A manager's set is the union of what its writes changed: a field may be a leaf in one
    write and hold fields in another; fieldsV1 keeps both (the cache of written lists holds
    the set, the next reader without the cache decodes the list)."""
    paths = set().union(*(fields(obj, sub) for obj, sub in objs))
    assert decode(encode(paths)) == paths


MANAGERS = st.sampled_from([CAROL, Manager("dave", "Update", "v1"),
                            Manager("kubelet", "Update", "v1", "status")])  # fmt: skip


@given(st.lists(st.tuples(OBJECTS, MANAGERS), min_size=1, max_size=6))
@example(  # carol owns `data` (a null leaf) and, after a status write, `data.a` beside it
    [({"metadata": {}, "spec": None, "data": None}, CAROL),
     ({"metadata": {}}, Manager("kubelet", "Update", "v1", "status")),
     ({"metadata": {}, "spec": None, "data": {"a": None}}, CAROL),
     ({"metadata": {}}, CAROL)]
)  # fmt: skip
def test_a_chain_of_updates_records_what_it_recorded_before(writes: list[Any]) -> None:
    """Each write's managedFields, decoded from the cache of written lists, equals the
    flattening version's, which decodes the stored list every time."""
    cached: Obj | None = None
    flattened: Obj | None = None
    for index, (body, manager) in enumerate(writes):
        time = f"2026-01-01T00:00:0{index}Z"
        new_cached = {**body, "metadata": dict(body["metadata"])}
        new_flattened = {**body, "metadata": dict(body["metadata"])}
        track_update(cached, new_cached, manager, time)
        track_update_flattened(flattened, new_flattened, manager, time)
        assert (
            new_cached["metadata"]["managedFields"] == (new_flattened["metadata"]["managedFields"])
        )
        cached, flattened = new_cached, new_flattened


# Objects whose associative lists share items: the same condition types and container names,
# with other fields, so that the walk meets items on both sides that differ inside.
CONDITIONS = st.lists(
    st.fixed_dictionaries({"type": st.sampled_from(["Ready", "Available"])},
                          optional={"status": st.sampled_from(["True", "False"]),
                                    "reason": st.sampled_from(["A", "B"])}),
    max_size=3,
)  # fmt: skip
CONTAINERS = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["app", "sidecar"])},
                          optional={"image": st.sampled_from(["a:1", "a:2"]),
                                    "env": st.lists(st.fixed_dictionaries(
                                        {"name": st.sampled_from(["X", "Y"])},
                                        optional={"value": st.sampled_from(["1", "2"])}),
                                        max_size=2)}),
    max_size=3,
)  # fmt: skip
WORKLOADS = st.fixed_dictionaries(
    {"metadata": st.just({})},
    optional={"spec": st.fixed_dictionaries({}, optional={"containers": CONTAINERS}),
              "status": st.fixed_dictionaries({}, optional={"conditions": CONDITIONS})},
)  # fmt: skip


@settings(max_examples=400)
@given(WORKLOADS, WORKLOADS, st.sampled_from(["", "status"]))
def test_changes_walk_inside_associative_lists(before: Obj, after: Obj, sub: str) -> None:
    assert _changes(before, after, sub) == flattened_changes(before, after, sub)


def test_an_update_takes_the_decoded_fields_of_the_object_it_supersedes() -> None:
    """The decoded form of a written list is kept for the next update of its object only
    (the update supersedes that object); a second update from the same object, as after a
    write that was refused, decodes the list again and records the same managedFields."""
    stored = {**cm(a="1"), "metadata": {"name": "c"}}
    track_update(None, stored, CAROL, NOW)
    listed = stored["metadata"]["managedFields"]
    assert managed_fields._WRITTEN.get(listed) is not None
    first = {**cm(a="2", b="1"), "metadata": {"name": "c"}}
    track_update(stored, first, Manager("dave", "Update", "v1"), "2026-01-01T00:00:01Z")
    assert managed_fields._WRITTEN.get(listed) is None  # taken: `stored` is superseded
    again = {**cm(a="2", b="1"), "metadata": {"name": "c"}}
    track_update(stored, again, Manager("dave", "Update", "v1"), "2026-01-01T00:00:01Z")
    assert again["metadata"]["managedFields"] == first["metadata"]["managedFields"]
