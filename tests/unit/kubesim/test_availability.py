"""Availability accounting: zero-Ready intervals (property-tested) and the ledger."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.availability import (
    AvailabilityLedger,
    count_at,
    is_serving,
    zero_ready_intervals,
    zero_ready_seconds,
)

Obj = dict[str, Any]

times = st.integers(0, 1000).map(float)
samples_st = st.lists(st.tuples(times, st.integers(0, 3)), max_size=12)
initial_st = st.one_of(st.none(), st.integers(0, 2))


def window() -> st.SearchStrategy[tuple[float, float]]:
    return st.tuples(times, times).map(sorted).map(lambda w: (w[0], w[1]))


@pytest.mark.parametrize(
    ("samples", "start", "end", "initial", "expected"),
    [
        ([], 0, 10, None, []),
        ([], 0, 10, 0, [(0, 10)]),
        ([(0, 1)], 0, 10, None, []),
        ([(0, 1), (3, 0), (5, 1)], 0, 10, None, [(3, 5)]),
        ([(0, 1), (3, 0), (5, 1)], 4, 10, None, [(4, 5)]),
        ([(0, 1), (3, 0), (5, 1)], 0, 4, None, [(3, 4)]),
        ([(0, 1), (3, 0), (4, 0), (5, 1)], 0, 10, None, [(3, 5)]),  # merged
        ([(0, 0), (2, 1), (2, 0), (6, 2)], 0, 10, None, [(0, 6)]),  # same time: later wins
        ([(0, 1), (8, 0)], 0, 10, None, [(8, 10)]),  # still out at the end of the window
        ([(5, 0)], 0, 10, 1, [(5, 10)]),
        ([(5, 0)], 0, 10, None, [(5, 10)]),  # unknown before the first sample is not an outage
        ([(0, 0)], 10, 10, None, []),  # empty window
    ],
)
def test_zero_ready_intervals_table(
    samples: list[tuple[float, int]],
    start: float,
    end: float,
    initial: int | None,
    expected: list[tuple[float, float]],
) -> None:
    assert zero_ready_intervals(samples, start, end, initial) == expected


@given(samples_st, window(), initial_st)
def test_intervals_are_sorted_disjoint_and_inside_the_window(
    samples: list[tuple[float, int]], w: tuple[float, float], initial: int | None
) -> None:
    start, end = w
    out = zero_ready_intervals(samples, start, end, initial)
    for lo, hi in out:
        assert start <= lo < hi <= end
    for (_, hi), (lo, _) in itertools.pairwise(out):
        assert hi < lo  # merged: never touching


@given(samples_st, window(), initial_st, st.integers(0, 1000))
def test_a_moment_is_in_an_outage_exactly_when_nothing_is_ready(
    samples: list[tuple[float, int]], w: tuple[float, float], initial: int | None, probe: int
) -> None:
    start, end = w
    at = float(probe)
    if not start <= at < end:
        return
    inside = any(lo <= at < hi for lo, hi in zero_ready_intervals(samples, start, end, initial))
    assert inside == (count_at(samples, at, initial) == 0)


@given(samples_st, times, times, times, initial_st)
def test_outage_seconds_add_up_across_a_split(
    samples: list[tuple[float, int]], a: float, b: float, c: float, initial: int | None
) -> None:
    lo, mid, hi = sorted((a, b, c))
    whole = zero_ready_seconds(samples, lo, hi, initial)
    parts = zero_ready_seconds(samples, lo, mid, initial) + zero_ready_seconds(
        samples, mid, hi, initial
    )
    assert whole == pytest.approx(parts)
    assert 0 <= whole <= hi - lo


@given(st.lists(st.tuples(times, st.integers(1, 3)), max_size=12), window())
def test_never_zero_means_no_outage(
    samples: list[tuple[float, int]], w: tuple[float, float]
) -> None:
    assert zero_ready_seconds(samples, *w, initial=1) == 0


# --- the ledger -------------------------------------------------------------------------


def deployment(name: str = "web") -> Obj:
    return {"metadata": {"namespace": "default", "name": name, "uid": f"d-{name}"}}


def replicaset(name: str, owner: str = "web") -> Obj:
    return {
        "metadata": {
            "namespace": "default",
            "name": name,
            "uid": f"rs-{name}",
            "ownerReferences": [
                {"kind": "Deployment", "name": owner, "uid": f"d-{owner}", "controller": True}
            ],
        }
    }


def pod(name: str, rs: str, ready: bool = True, terminating: bool = False) -> Obj:
    meta: Obj = {
        "namespace": "default",
        "name": name,
        "ownerReferences": [
            {"kind": "ReplicaSet", "name": rs, "uid": f"rs-{rs}", "controller": True}
        ],
    }
    if terminating:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    status = "True" if ready else "False"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": status}]}}


def test_ledger_follows_a_surge_rollout() -> None:
    ledger = AvailabilityLedger()
    ledger.deployment_event(0, "ADDED", deployment())
    ledger.replicaset_event(0, "ADDED", replicaset("web-1"))
    ledger.pod_event(1, "ADDED", pod("a", "web-1", ready=False))
    ledger.pod_event(2, "MODIFIED", pod("a", "web-1"))
    ledger.replicaset_event(3, "ADDED", replicaset("web-2"))
    ledger.pod_event(4, "ADDED", pod("b", "web-2", ready=False))
    ledger.pod_event(5, "MODIFIED", pod("b", "web-2"))
    ledger.pod_event(6, "MODIFIED", pod("a", "web-1", terminating=True))
    ledger.pod_event(7, "DELETED", pod("a", "web-1", terminating=True))
    web = ledger.timeline("default", "web", until=10)
    assert web.samples == ((0, 0), (2, 1), (5, 2), (6, 1))
    assert web.max_ready(start=2) == 2
    assert web.zero_ready_seconds(start=2) == 0
    assert web.zero_ready_seconds() == 2
    assert web.rollouts(start=1) == ["web-2"]
    assert web.rollouts() == ["web-1", "web-2"]


def test_ledger_counts_pods_only_once_their_replicaset_is_known() -> None:
    ledger = AvailabilityLedger()
    ledger.pod_event(1, "ADDED", pod("a", "web-1"))
    assert ledger.ready_counts() == {}
    ledger.replicaset_event(2, "ADDED", replicaset("web-1"))
    assert ledger.ready_counts() == {("default", "web"): 1}
    assert ledger.timeline("default", "web", until=3).samples == ((2, 1),)


def test_ledger_ignores_pods_of_a_replaced_replicaset_uid_and_other_owners() -> None:
    ledger = AvailabilityLedger()
    ledger.replicaset_event(0, "ADDED", replicaset("web-1"))
    stale = pod("a", "web-1")
    stale["metadata"]["ownerReferences"][0]["uid"] = "old"
    ledger.pod_event(1, "ADDED", stale)
    bare = {"metadata": {"namespace": "default", "name": "bare"}, "status": {}}
    ledger.pod_event(2, "ADDED", bare)
    assert ledger.ready_counts() == {}


def test_a_drain_outage_is_measured_between_its_marks() -> None:
    ledger = AvailabilityLedger()
    ledger.deployment_event(0, "ADDED", deployment())
    ledger.replicaset_event(0, "ADDED", replicaset("web-1"))
    ledger.pod_event(1, "ADDED", pod("a", "web-1"))
    start = ledger.mark(2, "drain-started", node="n")
    ledger.pod_event(3, "MODIFIED", pod("a", "web-1", terminating=True))
    ledger.replicaset_event(3, "MODIFIED", replicaset("web-1"))
    ledger.pod_event(3.5, "ADDED", pod("b", "web-1", ready=False))
    ledger.pod_event(4, "DELETED", pod("a", "web-1", terminating=True))
    end = ledger.mark(5, "drain-finished", node="n")
    ledger.pod_event(6.5, "MODIFIED", pod("b", "web-1"))
    web = ledger.timeline("default", "web", until=10)
    assert web.zero_ready_intervals(start.at, end.at) == [(3, 5)]
    assert web.zero_ready_intervals(start.at) == [(3, 6.5)]
    assert web.zero_ready_seconds(start.at) == 3.5


class RecountingLedger(AvailabilityLedger):
    """The ledger as it was: every event recounts every pod (the reference behaviour)."""

    def _refresh(self, at: float, touched: object) -> None:
        for key, count in self.ready_counts_by_scan().items():
            series = self.samples.setdefault(key, [])
            if not series or series[-1][1] != count:
                series.append((at, count))

    def ready_counts_by_scan(self) -> dict[tuple[str, str], int]:
        counts = dict.fromkeys(self._deployments, 0)
        for pod in self._pods.values():
            owner = self.deployment_of(pod)
            if owner is not None:
                counts[owner] = counts.get(owner, 0) + (1 if is_serving(pod) else 0)
        return counts


def replaced_uid(rs: Obj) -> Obj:
    rs["metadata"]["uid"] += "-2"
    return rs


ledger_events = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
                  st.builds(pod, st.sampled_from(["p1", "p2", "p3", "p4"]),
                            st.sampled_from(["a", "b", "c"]), st.booleans(), st.booleans())),
        st.tuples(st.just("rs"), st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
                  st.builds(replicaset, st.sampled_from(["a", "b", "c"]),
                            st.sampled_from(["web", "api"]))
                  | st.builds(replaced_uid, st.builds(replicaset, st.sampled_from(["a", "b"])))),
        st.tuples(st.just("deployment"), st.sampled_from(["ADDED", "DELETED"]),
                  st.builds(deployment, st.sampled_from(["web", "api", "db"]))),
    ),
    max_size=40,
)  # fmt: skip


@given(ledger_events)
def test_incremental_counts_equal_a_full_recount(events: list[tuple[str, str, Obj]]) -> None:
    incremental, recounting = AvailabilityLedger(), RecountingLedger()
    for at, (kind, type_, obj) in enumerate(events):
        for ledger in (incremental, recounting):
            feed = {"pod": ledger.pod_event, "rs": ledger.replicaset_event,
                    "deployment": ledger.deployment_event}[kind]  # fmt: skip
            feed(float(at), type_, obj)
        assert incremental.ready_counts() == recounting.ready_counts_by_scan()
    assert incremental.samples == recounting.samples
