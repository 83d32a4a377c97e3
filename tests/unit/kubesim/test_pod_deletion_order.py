"""Which pods a ReplicaSet deletes first: controller_utils.go ActivePodsWithRanks.Less."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.meta import rfc3339
from kubesim.cluster.podutil import is_pod_active, is_pod_available, pods_to_delete

Obj = dict[str, Any]
NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def ago(seconds: float) -> str:
    return rfc3339(NOW - dt.timedelta(seconds=seconds))


def pod(
    name: str,
    node: str = "n1",
    phase: str = "Running",
    ready_for: float | None = 600,
    created: float = 3600,
    restarts: int = 0,
    cost: str | None = None,
    uid: str | None = None,
) -> Obj:
    conditions = []
    if ready_for is not None:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": ago(ready_for)})
    else:
        conditions.append({"type": "Ready", "status": "False"})
    meta: Obj = {"name": name, "uid": uid or name, "creationTimestamp": ago(created)}
    if cost is not None:
        meta["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": cost}
    return {
        "metadata": meta,
        "spec": {"nodeName": node} if node else {},
        "status": {
            "phase": phase,
            "conditions": conditions,
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
        },
    }


def first(pods: list[Obj], related: list[Obj] | None = None) -> str:
    [chosen] = pods_to_delete(pods, related if related is not None else pods, 1, NOW)
    return str(chosen["metadata"]["name"])


@pytest.mark.parametrize(
    ("rule", "doomed", "kept"),
    [
        (
            "1. unassigned before assigned",
            pod("a", node="", phase="Pending", ready_for=None),
            pod("b"),
        ),
        (
            "2. pending before running",
            pod("a", phase="Pending", ready_for=None),
            pod("b", ready_for=None),
        ),
        (
            "2. unknown before running",
            pod("a", phase="Unknown", ready_for=None),
            pod("b", ready_for=None),
        ),
        ("3. not ready before ready", pod("a", ready_for=None), pod("b")),
        ("4. lower deletion cost first", pod("a", cost="-5"), pod("b", cost="10")),
        ("4. invalid deletion cost counts as 0", pod("a", cost="x"), pod("b", cost="1")),
        (
            "6. ready for less time first (other log2 bucket)",
            pod("a", ready_for=10),
            pod("b", ready_for=1000),
        ),
        ("7. more restarts first", pod("a", restarts=5), pod("b", restarts=1)),
        ("8. newer first (other log2 bucket)", pod("a", created=100), pod("b", created=5000)),
    ],
)
def test_one_rule_decides(rule: str, doomed: Obj, kept: Obj) -> None:
    assert first([kept, doomed]) == "a", rule
    assert first([doomed, kept]) == "a", rule


def test_doubled_up_pods_go_first() -> None:
    """5. the pod sharing its node with more pods of the same owner is deleted first."""
    alone, crowded = pod("alone", node="n1"), pod("crowded", node="n2")
    sibling = pod("sibling", node="n2")
    assert first([alone, crowded], [alone, crowded, sibling]) == "crowded"


def test_same_log2_bucket_falls_back_to_uid_order() -> None:
    """LogarithmicScaleDown: ready 600s and 700s ago share a bucket; uid decides."""
    a, b = pod("a", ready_for=700, uid="2"), pod("b", ready_for=600, uid="1")
    assert first([a, b]) == "b"


def test_rule_order_unassigned_beats_everything_else() -> None:
    unscheduled = pod("u", node="", phase="Pending", ready_for=None, created=99999)
    others = [
        pod("x", ready_for=None, restarts=9, created=1),
        pod("y", phase="Pending", ready_for=None),
    ]
    assert first([*others, unscheduled]) == "u"


def test_scale_down_from_three_to_one_keeps_the_ready_scheduled_pod() -> None:
    pods = [
        pod("ready"),
        pod("unscheduled", node="", phase="Pending", ready_for=None),
        pod("not-ready", ready_for=None),
    ]
    doomed = pods_to_delete(pods, pods, 2, NOW)
    assert [p["metadata"]["name"] for p in doomed] == ["unscheduled", "not-ready"]


def test_deleting_all_needs_no_ranking() -> None:
    pods = [pod("a"), pod("b")]
    assert pods_to_delete(pods, pods, 5, NOW) == pods


@pytest.mark.parametrize(
    ("phase", "deleting", "active"),
    [
        ("Running", False, True),
        ("Pending", False, True),
        ("Succeeded", False, False),
        ("Failed", False, False),
        ("Running", True, False),
    ],
)
def test_active_pods(phase: str, deleting: bool, active: bool) -> None:
    p = pod("a", phase=phase)
    if deleting:
        p["metadata"]["deletionTimestamp"] = ago(0)
    assert is_pod_active(p) is active


@pytest.mark.parametrize(
    ("ready_for", "min_ready", "available"),
    [(None, 0, False), (0, 0, True), (5, 10, False), (10, 10, False), (11, 10, True)],
)
def test_available_after_min_ready_seconds(
    ready_for: float | None, min_ready: int, available: bool
) -> None:
    # "Before" is strict: exactly minReadySeconds after the transition is not yet available.
    assert is_pod_available(pod("a", ready_for=ready_for), min_ready, NOW) is available


pods_strategy = st.lists(
    st.builds(
        pod,
        name=st.uuids().map(str),
        node=st.sampled_from(["", "n1", "n2"]),
        phase=st.sampled_from(["Pending", "Running", "Unknown"]),
        ready_for=st.one_of(st.none(), st.floats(0, 10_000)),
        created=st.floats(0, 100_000),
        restarts=st.integers(0, 5),
    ),
    min_size=1,
    max_size=8,
)


@given(pods_strategy, st.integers(0, 8))
def test_unassigned_pods_always_go_before_assigned_ones(pods: list[Obj], count: int) -> None:
    doomed = pods_to_delete(pods, pods, count, NOW)
    assert len(doomed) == min(count, len(pods))
    unassigned = [p for p in pods if not p["spec"].get("nodeName")]
    doomed_unassigned = [p for p in doomed if not p["spec"].get("nodeName")]
    assert len(doomed_unassigned) == min(len(unassigned), len(doomed))
