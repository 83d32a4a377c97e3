"""Deployment bookkeeping (deployment_util.go), status (sync.go/progress.go) and rollout
plans (rolling.go, recreate.go, sync.go `scale`), on plain objects."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.meta import rfc3339
from kubesim.cluster import deployment_status as ds
from kubesim.cluster import deployment_util as du
from kubesim.cluster.rollout_plan import (
    ScaleStep,
    cleanup_candidates,
    is_scaling_event,
    new_rs_target,
    old_rs_scale_down,
    proportional_scale,
    recreate_scale_down,
)

Obj = dict[str, Any]
NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
TEMPLATE: Obj = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
}


def deployment(
    replicas: int = 1,
    surge: Any = 1,
    unavailable: Any = 0,
    strategy: str = "RollingUpdate",
    generation: int = 1,
    **extra: Any,
) -> Obj:
    spec: Obj = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "web"}},
        "template": copy.deepcopy(TEMPLATE),
        "progressDeadlineSeconds": 600,
        "revisionHistoryLimit": 10,
        "strategy": {"type": strategy},
    }
    if strategy == "RollingUpdate":
        spec["strategy"]["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    spec.update(extra)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "uid": "d-uid",
            "generation": generation,
        },
        "spec": spec,
        "status": {},
    }


def rs(
    name: str,
    replicas: int,
    available: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
    revision: str | None = None,
    template: Obj | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    ann = dict(annotations or {})
    if revision is not None:
        ann[du.REVISION] = revision
    avail = replicas if available is None else available
    return {
        "metadata": {
            "name": name,
            "uid": f"{name}-uid",
            "creationTimestamp": created,
            "annotations": ann,
            "generation": 1,
        },
        "spec": {"replicas": replicas, "template": template or copy.deepcopy(TEMPLATE)},
        "status": {
            "replicas": replicas,
            "readyReplicas": avail,
            "availableReplicas": avail,
            "observedGeneration": 1,
        },
    }


def restarted(template: Obj, when: str = "2026-01-01T12:00:00Z") -> Obj:
    out = copy.deepcopy(template)
    out["metadata"]["annotations"] = {"kubectl.kubernetes.io/restartedAt": when}
    return out


# --- hashing and identification -----------------------------------------------------------


def test_template_hash_is_stable_and_safe_encoded() -> None:
    first = du.compute_hash(TEMPLATE)
    assert first == du.compute_hash(copy.deepcopy(TEMPLATE))
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert 1 <= len(first) <= 10  # a decimal uint32, one letter per digit


def test_template_hash_ignores_empty_values_like_semantic_equality() -> None:
    noisy = copy.deepcopy(TEMPLATE)
    noisy["metadata"]["annotations"] = {}
    noisy["spec"]["volumes"] = None
    assert du.compute_hash(noisy) == du.compute_hash(TEMPLATE)


@pytest.mark.parametrize(
    "change",
    [
        lambda t: (
            t["metadata"]
            .setdefault("annotations", {})
            .update({"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"})
        ),
        lambda t: t["spec"]["containers"][0].update({"image": "nginx:1.28"}),
        lambda t: t["metadata"]["labels"].update({"tier": "front"}),
        lambda t: t["spec"].update({"terminationGracePeriodSeconds": 5}),
    ],
)
def test_any_template_change_changes_the_hash(change: Any) -> None:
    changed = copy.deepcopy(TEMPLATE)
    change(changed)
    assert du.compute_hash(changed) != du.compute_hash(TEMPLATE)
    assert not du.equal_ignore_hash(changed, TEMPLATE)


def test_collision_count_changes_the_hash() -> None:
    assert du.compute_hash(TEMPLATE, 1) != du.compute_hash(TEMPLATE)
    assert du.compute_hash(TEMPLATE, 1) != du.compute_hash(TEMPLATE, 2)


def test_equal_ignore_hash_ignores_only_the_hash_label() -> None:
    hashed = copy.deepcopy(TEMPLATE)
    hashed["metadata"]["labels"]["pod-template-hash"] = "abc"
    assert du.equal_ignore_hash(hashed, TEMPLATE)


def test_find_new_and_old_replica_sets() -> None:
    d = deployment()
    d["spec"]["template"] = restarted(TEMPLATE)
    old = rs("web-old", 1, created="2026-01-01T00:00:00Z")
    empty = rs("web-older", 0, created="2025-01-01T00:00:00Z")
    twin_a = rs("web-b", 0, created="2026-01-02T00:00:00Z", template=restarted(TEMPLATE))
    twin_b = rs("web-a", 0, created="2026-01-03T00:00:00Z", template=restarted(TEMPLATE))
    new = du.find_new_replica_set(d, [old, twin_b, twin_a, empty])
    assert new is twin_a  # the oldest matching one
    with_pods, everything = du.find_old_replica_sets(d, [old, twin_b, twin_a, empty])
    assert with_pods == [old]
    assert everything == [empty, old, twin_b]


def test_max_revision_skips_unparsable() -> None:
    rss = [rs("a", 1, revision="3"), rs("b", 1, revision="x"), rs("c", 1)]
    assert du.max_revision(rss) == 3


def test_new_replica_set_annotations_on_creation() -> None:
    d = deployment(replicas=4, surge="25%")
    d["metadata"]["annotations"] = {du.LAST_APPLIED: "{}", "team": "shop", du.REVISION: "7"}
    new = rs("web-new", 0)
    assert du.set_new_replica_set_annotations(d, new, 8, exists=False)
    assert new["metadata"]["annotations"] == {
        "team": "shop",
        du.REVISION: "8",
        du.DESIRED_REPLICAS: "4",
        du.MAX_REPLICAS: "5",
    }


def test_rolling_back_to_a_replica_set_keeps_its_revision_history() -> None:
    d = deployment()
    back = rs("web-a", 1, revision="2", annotations={du.REVISION_HISTORY: "1"})
    assert du.set_new_replica_set_annotations(d, back, 5, exists=True)
    assert back["metadata"]["annotations"][du.REVISION] == "5"
    assert back["metadata"]["annotations"][du.REVISION_HISTORY] == "1,2"
    assert not du.set_new_replica_set_annotations(d, back, 5, exists=True)


# --- status -------------------------------------------------------------------------------


def test_calculate_status_sums_replica_sets_and_sets_available() -> None:
    d = deployment(replicas=3, surge=1, unavailable=1)
    new, old = rs("new", 2, available=1), rs("old", 2, available=2)
    status = ds.calculate_status([old, new], new, d, NOW)
    assert {
        k: status[k]
        for k in (
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
        )
    } == {
        "replicas": 4,
        "updatedReplicas": 2,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "unavailableReplicas": 1,
    }
    [available] = status["conditions"]
    assert (available["type"], available["status"], available["reason"]) == (
        "Available",
        "True",
        "MinimumReplicasAvailable",
    )


def test_wire_status_omits_zero_fields_like_go() -> None:
    d = deployment(replicas=1)
    status = ds.rollout_status([rs("new", 1, available=0)], rs("new", 1, available=0), d, NOW)
    assert "availableReplicas" not in status and status["unavailableReplicas"] == 1


def _progressing(status: Obj) -> tuple[str, str] | None:
    cond = ds.get_condition(status, "Progressing")
    return None if cond is None else (cond["status"], cond["reason"])


def test_rollout_status_progress_complete_and_timeout() -> None:
    d = deployment()
    d["status"] = {
        "conditions": [
            ds.new_condition(
                "Progressing", "True", ds.NEW_REPLICA_SET, 'Created new replica set "new"', NOW
            )
        ]
    }
    new = rs("new", 1, available=0)
    new["status"]["readyReplicas"] = 0
    old = rs("old", 1)
    # More ready pods than the stored status: progress.
    progressing = ds.rollout_status([old, new], new, d, NOW)
    assert _progressing(progressing) == ("True", "ReplicaSetUpdated")
    # Nothing moved for longer than the deadline: timed out.
    d["status"] = progressing
    late = NOW + dt.timedelta(seconds=601)
    timed_out = ds.rollout_status([old, new], new, d, late)
    assert _progressing(timed_out) == ("False", "ProgressDeadlineExceeded")
    assert (ds.get_condition(timed_out, "Progressing") or {})["message"] == (
        'ReplicaSet "new" has timed out progressing.'
    )
    # Everything updated and available: complete.
    done_new = rs("new", 1)
    old_gone = rs("old", 0)
    d["status"] = progressing
    complete = ds.rollout_status([old_gone, done_new], done_new, d, NOW)
    assert _progressing(complete) == ("True", "NewReplicaSetAvailable")
    assert ds.deployment_complete(d, complete)


def test_requeue_for_progress_check_counts_down_the_deadline() -> None:
    d = deployment()
    d["status"] = {
        "conditions": [ds.new_condition("Progressing", "True", ds.REPLICA_SET_UPDATED, "x", NOW)]
    }
    new = rs("new", 1, available=0)
    status = ds.rollout_status([new], new, d, NOW)
    assert ds.requeue_for_progress_check(d, status, NOW + dt.timedelta(seconds=100)) == 501


def test_set_condition_keeps_transition_time_when_status_unchanged() -> None:
    status: Obj = {"conditions": []}
    earlier = NOW - dt.timedelta(hours=1)
    ds.set_condition(status, ds.new_condition("Progressing", "True", "A", "m", earlier))
    ds.set_condition(status, ds.new_condition("Progressing", "True", "B", "m", NOW))
    [cond] = status["conditions"]
    assert (cond["reason"], cond["lastTransitionTime"], cond["lastUpdateTime"]) == (
        "B",
        rfc3339(earlier),
        rfc3339(NOW),
    )


# --- plans --------------------------------------------------------------------------------


def test_new_replica_set_target() -> None:
    d = deployment(replicas=1, surge=1, unavailable=0)
    assert new_rs_target(d, [rs("old", 1), rs("new", 0)], rs("new", 0)) == 1
    assert new_rs_target(d, [rs("old", 1), rs("new", 3)], rs("new", 3)) == 1  # scale down


@pytest.mark.parametrize(
    ("d", "old", "new", "expected"),
    [
        # maxSurge 1 / maxUnavailable 0: the old pod stays until the new one is available.
        (deployment(1, 1, 0), [rs("old", 1)], rs("new", 1, available=0), []),
        (deployment(1, 1, 0), [rs("old", 1)], rs("new", 1), [ScaleStep("old", 0)]),
        # Unhealthy old pods are removed first; then availability stops it.
        (
            deployment(3, 1, 1),
            [rs("old", 3, available=1)],
            rs("new", 1, available=1),
            [ScaleStep("old", 1)],
        ),
        # maxUnavailable 0 and nothing new available: not even unhealthy pods may go.
        (deployment(3, 1, 0), [rs("old", 3, available=1)], rs("new", 1, available=0), []),
        # rolling.go's example: 10 replicas, maxUnavailable 2, maxSurge 3, new pods crashloop.
        (deployment(10, 3, 2), [rs("old", 8, available=7)], rs("new", 5, available=0), []),
        # Oldest first, within the availability budget.
        (
            deployment(4, 1, 1),
            [
                rs("a", 2, created="2026-01-01T00:00:00Z"),
                rs("b", 2, created="2026-01-02T00:00:00Z"),
            ],
            rs("new", 1, available=1),
            [ScaleStep("a", 0)],
        ),
    ],
)
def test_old_replica_set_scale_down(
    d: Obj, old: list[Obj], new: Obj, expected: list[ScaleStep]
) -> None:
    assert old_rs_scale_down(d, [*old, new], du.active(old), new) == expected


def test_recreate_scales_every_active_old_replica_set_to_zero() -> None:
    assert recreate_scale_down([rs("a", 2), rs("b", 1)]) == [ScaleStep("a", 0), ScaleStep("b", 0)]


@pytest.mark.parametrize(
    ("want", "was", "new", "old", "expected"),
    [  # sync_test.go TestScale (maxSurge 0, maxUnavailable 0 -> surge 0)
        (12, 10, 10, None, [("new", 12)]),
        (5, 10, 10, None, [("new", 5)]),
        (10, 5, 2, 3, [("old", 6), ("new", 4)]),
        (3, 5, 2, 3, [("old", 2), ("new", 1)]),
        (4, 9, 8, 1, [("new", 4), ("old", 0)]),
    ],
)
def test_proportional_scaling(
    want: int, was: int, new: int, old: int | None, expected: list[tuple[str, int]]
) -> None:
    d = deployment(want, 0, 0)
    d["status"] = {"replicas": was}
    annotations = {du.DESIRED_REPLICAS: str(was), du.MAX_REPLICAS: str(was)}
    new_rs = rs("new", new, created="2026-01-02T00:00:00Z", annotations=annotations)
    olds = (
        []
        if old is None
        else [rs("old", old, created="2026-01-01T00:00:00Z", annotations=annotations)]
    )
    assert is_scaling_event(d, new_rs, olds)
    steps = proportional_scale(d, new_rs, olds)
    assert [(s.name, s.replicas) for s in steps] == expected


@given(st.integers(0, 30), st.integers(1, 30), st.integers(1, 30), st.integers(0, 5))
def test_proportional_scaling_lands_on_the_allowed_total(
    want: int, new: int, old: int, surge: int
) -> None:
    was = new + old
    d = deployment(want, surge, 0)
    annotations = {du.DESIRED_REPLICAS: str(was), du.MAX_REPLICAS: str(was + surge)}
    new_rs = rs("new", new, created="2026-01-02T00:00:00Z", annotations=annotations)
    old_rs = rs("old", old, created="2026-01-01T00:00:00Z", annotations=annotations)
    steps = proportional_scale(d, new_rs, [old_rs])
    sizes = {"new": new, "old": old, **{s.name: s.replicas for s in steps}}
    assert all(size >= 0 for size in sizes.values())
    allowed = want + du.max_surge(d) if want > 0 else 0
    assert sum(sizes.values()) == allowed


def test_cleanup_keeps_revision_history_limit_and_never_deletes_busy_ones() -> None:
    d = deployment(revisionHistoryLimit=1)
    olds = [rs("r1", 0, revision="1"), rs("r2", 2, revision="2"), rs("r3", 0, revision="3")]
    assert [r["metadata"]["name"] for r in cleanup_candidates(d, olds)] == ["r1"]
