"""The evictions ledger (decision/ledger.py, docs/decisions.md "The ledger"): its format,
what counts as gone and when, what is removed, the reconciler's cleaning, and the invariant
it exists for, as a property: any number of replicas deciding evictions of one Deployment's
pods at once, each on its own (possibly stale) view, writing with the resourceVersion they
read, never let go together the last Ready pod on a node that stays."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from graceful_drain.annotations import EVICTIONS_ANNOTATION
from graceful_drain.controller.decision.ledger import (
    ENTRY_LIFETIME,
    MAX_ENTRIES,
    REFRESH_AFTER,
    SETTLE,
    LedgerEntry,
    encode_ledger,
    gone_uids,
    kept,
    ledger_patch,
    next_expiry,
    parse_ledger,
    with_recorded,
)
from graceful_drain.controller.decision.lookups import (
    DeploymentFound,
    PodFound,
    ready_elsewhere_among,
)
from graceful_drain.controller.decision.model import DeploymentInfo, PodInfo
from graceful_drain.controller.decision.reasons import Decision, Reason
from graceful_drain.controller.decision.stamp import MAX_DECIDE_ATTEMPTS, RecordIntent
from graceful_drain.controller.decision.table import DecisionConfig, decide
from graceful_drain.controller.reconcile.reconciler import Reconciler

from .objects import DEPLOYMENT, NOW, POD, REQUEST, raw_deployment
from .reconciler_fakes import Patcher, Source


def entry(pod: str, seconds_ago: float, uid: str | None = None) -> LedgerEntry:
    return LedgerEntry(pod, uid or f"uid-{pod}", NOW - timedelta(seconds=seconds_ago))


# --- format -----------------------------------------------------------------------------------


def test_the_annotation_round_trips_as_compact_json() -> None:
    entries = (entry("web-1", 3), entry("web-2", 0))
    raw = encode_ledger(entries)
    assert raw == (
        '{"web-1":{"uid":"uid-web-1","at":"2024-05-01T11:59:57.000000Z"},'
        '"web-2":{"uid":"uid-web-2","at":"2024-05-01T12:00:00.000000Z"}}'
    )
    assert parse_ledger(raw) == (entries, False)


@pytest.mark.parametrize(
    "raw", ["", "[]", "not json", '{"web-1": 3}', '{"web-1": {"uid": "u"}}', '{"a": null}']
)
def test_a_malformed_ledger_is_empty_and_said_so(raw: str) -> None:
    assert parse_ledger(raw) == ((), True)


def test_an_entry_with_a_bad_time_is_dropped_the_others_kept() -> None:
    raw = '{"web-1":{"uid":"u1","at":"yesterday"},"web-2":{"uid":"u2","at":"2024-05-01T12:00:00Z"}}'
    assert parse_ledger(raw) == ((LedgerEntry("web-2", "u2", NOW),), True)


def test_the_deployment_view_reads_it_and_lists_a_malformed_one() -> None:
    raw = raw_deployment()
    raw["metadata"]["annotations"][EVICTIONS_ANNOTATION] = encode_ledger([entry("web-1", 1)])
    assert DeploymentInfo.from_object(raw).evictions == (entry("web-1", 1),)
    raw["metadata"]["annotations"][EVICTIONS_ANNOTATION] = "{"
    broken = DeploymentInfo.from_object(raw)
    assert broken.evictions == ()
    assert f"metadata.annotations[{EVICTIONS_ANNOTATION}]" in broken.malformed


# --- counting and expiry ----------------------------------------------------------------------


def test_an_entry_counts_the_pod_as_gone_for_the_pdb_deletion_timeout() -> None:
    """The disruption controller's DeletionTimeout (2 min) for status.disruptedPods."""
    assert timedelta(minutes=2) == ENTRY_LIFETIME
    young, edge, old = entry("a", 0), entry("b", 119.999), entry("c", 120)
    assert gone_uids([young, edge, old], NOW) == {"uid-a", "uid-b"}
    future = LedgerEntry("d", "uid-d", NOW + timedelta(minutes=5))  # clock skew: holds
    assert gone_uids([future], NOW) == {"uid-d"}


def test_recorded_pods_are_not_counted_as_ready_elsewhere() -> None:
    others = [replace(POD, name=f"web-{i}", uid=f"uid-web-{i}", node_name="node-b")
              for i in (1, 2)]  # fmt: skip
    gone = gone_uids([entry("web-1", 5)], NOW)
    assert ready_elsewhere_among(POD, others, lambda node: node == "node-a") == 2
    assert ready_elsewhere_among(POD, others, lambda node: node == "node-a", gone) == 1
    # another pod under the recorded name (a StatefulSet-like re-creation): not the one let go
    replaced = [replace(others[0], uid="new-uid")]
    assert ready_elsewhere_among(POD, replaced, lambda node: False, gone) == 1


def test_removal_waits_for_the_observed_deletion_and_the_settle_time() -> None:
    present = {"web-1": "uid-web-1", "web-3": "other-uid"}

    def pod_uid(namespace: str, name: str) -> str | None:
        return present.get(name)

    entries = [
        entry("web-1", 60),  # its pod is still there: kept
        entry("web-2", SETTLE.total_seconds() - 1),  # gone, but too recent: kept
        entry("web-2b", SETTLE.total_seconds()),  # gone, settled: removed
        entry("web-3", 30),  # a pod of that name with another uid: removed
        entry("web-4", 121),  # expired: removed
    ]
    assert [e.pod for e in kept(entries, "default", NOW, pod_uid)] == ["web-1", "web-2"]
    # no synced pod cache: only expiry removes
    assert [e.pod for e in kept(entries, "default", NOW, None)] == [
        "web-1", "web-2", "web-2b", "web-3",
    ]  # fmt: skip


def test_next_expiry_is_the_earliest_settle_or_lifetime_ahead() -> None:
    assert next_expiry([], NOW) is None
    assert next_expiry([entry("a", 5)], NOW) == NOW + SETTLE - timedelta(seconds=5)
    assert next_expiry([entry("a", 100)], NOW) == NOW + timedelta(seconds=20)


def test_recording_replaces_the_pods_entry_and_prunes_in_the_same_write() -> None:
    entries = (entry("web-1", 200), entry("web-2", 10), entry("web-5", 30))
    result = with_recorded(entries, "web-5", "uid-web-5", NOW, "default", None)
    assert result == (entry("web-2", 10), LedgerEntry("web-5", "uid-web-5", NOW))


def test_the_patch_is_guarded_by_the_uid_and_the_resource_version() -> None:
    patch = ledger_patch("dep-uid", "42", True, [entry("web-1", 0)])
    assert patch == [
        {"op": "test", "path": "/metadata/uid", "value": "dep-uid"},
        {"op": "add", "path": "/metadata/resourceVersion", "value": "42"},
        {
            "op": "add",
            "path": "/metadata/annotations/graceful-drain.stonal.com~1evictions",
            "value": encode_ledger([entry("web-1", 0)]),
        },
    ]
    bare = ledger_patch("dep-uid", "42", False, [entry("web-1", 0)])
    assert bare[-1] == {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {EVICTIONS_ANNOTATION: encode_ledger([entry("web-1", 0)])},
    }
    empty = ledger_patch("dep-uid", "42", True, [])
    assert empty[-1] == {
        "op": "remove", "path": "/metadata/annotations/graceful-drain.stonal.com~1evictions",
    }  # fmt: skip


# --- the table: which allows record, and when the write is skipped ------------------------------

TWO = replace(DEPLOYMENT, replicas=2, ready_replicas=2, status_replicas=2, updated_replicas=2,
              available_replicas=2)  # fmt: skip
OTHER = replace(POD, name="web-2", uid="uid-web-2", node_name="node-b")


def decide_for(deployment: DeploymentInfo, evicted: PodInfo = POD,
               others: tuple[PodInfo, ...] = (OTHER,)) -> Decision:  # fmt: skip
    def elsewhere(pod: PodInfo, dep: DeploymentInfo) -> int:
        return ready_elsewhere_among(pod, others, lambda node: node == "node-a",
                                     gone_uids(dep.evictions, NOW))  # fmt: skip

    request = msgspec.structs.replace(REQUEST, name=evicted.name)
    return decide(request, PodFound(evicted), DeploymentFound(deployment), DecisionConfig(), NOW,
                  ready_elsewhere=elsewhere, ready_besides=elsewhere)  # fmt: skip


def test_ready_elsewhere_records_the_pod_and_the_record_holds_the_other() -> None:
    first = decide_for(TWO)
    assert first.reason is Reason.READY_ELSEWHERE and first.allowed
    assert first.record == RecordIntent(TWO, POD.name, POD.uid, NOW)
    # The record landed (a new resourceVersion): the other pod's eviction counts POD as gone.
    recorded = replace(TWO, resource_version="43",
                       evictions=(LedgerEntry(POD.name, POD.uid, NOW),))  # fmt: skip
    other_node_drained = decide_for(recorded, replace(OTHER, node_name="node-a"), (POD,))
    assert other_node_drained.reason is Reason.ROLLOUT_REQUESTED
    assert not other_node_drained.allowed


def test_a_retried_eviction_of_a_recorded_pod_writes_nothing_until_half_the_lifetime() -> None:
    recent = replace(TWO, evictions=(LedgerEntry(POD.name, POD.uid, NOW - REFRESH_AFTER / 2),))
    assert decide_for(recent).reason is Reason.READY_ELSEWHERE
    assert decide_for(recent).record is None
    stale = replace(TWO, evictions=(LedgerEntry(POD.name, POD.uid, NOW - REFRESH_AFTER),))
    assert decide_for(stale).record is not None
    replaced = replace(TWO, evictions=(LedgerEntry(POD.name, "older-uid", NOW),))
    assert decide_for(replaced).record is not None


def test_an_unprotected_pod_writes_nothing() -> None:
    opted_out = decide_for(replace(TWO, enabled_value="false"))
    assert opted_out.reason is Reason.OPTED_OUT and opted_out.record is None


def test_a_pod_not_ready_in_this_view_is_recorded() -> None:
    """Another replica's pod cache may hold the same pod Ready and count it as staying: the
    record makes its decision conflict and count the pod as gone (seen on the real control
    plane with two replicas whose pod watches lagged, under the real descheduler)."""
    not_ready = decide_for(TWO, replace(POD, ready=False), others=())
    assert not_ready.reason is Reason.POD_NOT_READY
    assert not_ready.record is not None and not_ready.record.pod == POD.name


# --- the invariant: concurrent replicas linearised by the guarded write -------------------------

NODES = ("node-a", "node-b", "node-c")


@dataclass
class ApiServer:
    """One Deployment with a resourceVersion, written only with the one it was read at."""

    deployment: DeploymentInfo
    rv: int = 1

    def read(self) -> DeploymentInfo:
        return replace(self.deployment, resource_version=str(self.rv))

    def patch(self, intent: RecordIntent) -> bool:
        if intent.deployment.resource_version != str(self.rv):
            return False  # 409
        entries = with_recorded(intent.deployment.evictions, intent.pod, intent.uid,
                                intent.recorded_at, "default", None)  # fmt: skip
        self.deployment = replace(self.deployment, evictions=entries)
        self.rv += 1
        return True


@settings(max_examples=300, deadline=None)
@given(
    placement=st.lists(st.integers(0, 2), min_size=2, max_size=6),
    drained=st.sets(st.integers(0, 2), max_size=2),
    evictions=st.lists(st.integers(0, 5), min_size=2, max_size=6),
    stale=st.lists(st.booleans(), min_size=6, max_size=6),
    order=st.permutations(range(6)),
)
def test_concurrent_replicas_never_let_go_the_last_ready_pod_on_a_node_that_stays(
    placement: list[int], drained: set[int], evictions: list[int], stale: list[bool],
    order: list[int],
) -> None:  # fmt: skip
    """Every eviction is decided by its own replica, all of them on the pods as they were
    before any deletion (no pod cache has seen one yet); a replica whose view is `stale`
    read the Deployment before every write. The writes land in `order`; a conflicting one
    re-reads and decides again (at most MAX_DECIDE_ATTEMPTS decisions, then held). Whatever
    was allowed, a Ready pod stays on a node that is not being drained, or none stayed to
    begin with."""
    pods = [replace(POD, name=f"web-{i}", uid=f"uid-{i}", node_name=NODES[node])
            for i, node in enumerate(placement)]  # fmt: skip
    drained_nodes = {NODES[i] for i in drained}
    server = ApiServer(replace(TWO, replicas=len(pods), ready_replicas=len(pods)))
    snapshot = server.read()  # what a stale replica's cache holds

    def elsewhere(pod: PodInfo, dep: DeploymentInfo) -> int:
        return ready_elsewhere_among(pod, pods, drained_nodes.__contains__,
                                     gone_uids(dep.evictions, NOW))  # fmt: skip

    def decide_on(target: PodInfo, view: DeploymentInfo) -> Decision:
        request = msgspec.structs.replace(REQUEST, name=target.name)
        return decide(request, PodFound(target), DeploymentFound(view), DecisionConfig(), NOW,
                      ready_elsewhere=elsewhere, ready_besides=elsewhere)  # fmt: skip

    targets = [pods[i % len(pods)] for i in evictions]
    first = [decide_on(t, snapshot if stale[n] else server.read()) for n, t in enumerate(targets)]
    let_go: set[str] = set()
    for n in (i for i in order if i < len(targets)):
        decision, target = first[n], targets[n]
        for _attempt in range(MAX_DECIDE_ATTEMPTS):
            if decision.record is None:
                break
            if server.patch(decision.record):
                break
            decision = decide_on(target, server.read())  # 409: re-read, decide again
        else:
            continue  # held (write-deferred)
        if decision.allowed and decision.record is None and decision.reason in (
            Reason.READY_ELSEWHERE, Reason.SURGE_READY,
        ):  # fmt: skip
            # allowed without a write: already recorded (a retry of the same pod)
            assert target.uid in gone_uids(server.deployment.evictions, NOW)
        if decision.allowed:
            let_go.add(target.name)
    staying_before = [p for p in pods if p.node_name not in drained_nodes]
    staying_after = [p for p in staying_before if p.name not in let_go]
    if staying_before:
        assert staying_after, (let_go, drained_nodes, placement)


# --- the reconciler cleans it, on a timer ------------------------------------------------------


def reconciler(source: Source, patcher: Patcher,
               pod_uid: Callable[[str, str], str | None] | None = None) -> Reconciler:  # fmt: skip
    return Reconciler(source, patcher, rollout_timeout=timedelta(minutes=10), clock=lambda: NOW,
                      ledger_pod_uid=lambda: pod_uid)  # fmt: skip


async def test_the_reconciler_removes_expired_entries_and_sets_a_timer_for_the_next() -> None:
    source = Source(replace(TWO, evictions=(entry("web-1", 130), entry("web-2", 100))))
    patcher = Patcher()
    result = await reconciler(source, patcher).reconcile(("default", "web"))
    assert result.ledger_cleaned
    [patch] = patcher.patches
    assert patch[1] == {"op": "add", "path": "/metadata/resourceVersion", "value": "42"}
    assert json.loads(patch[2]["value"]) == {
        "web-2": {"uid": "uid-web-2", "at": "2024-05-01T11:58:20.000000Z"}
    }
    assert result.requeue_after == pytest.approx(20.0)  # web-2 expires then


async def test_the_reconciler_removes_the_entry_of_a_pod_seen_deleted() -> None:
    source = Source(replace(TWO, evictions=(entry("web-1", 20),)))
    patcher = Patcher()
    result = await reconciler(source, patcher, lambda ns, name: None).reconcile(("default", "web"))
    assert result.ledger_cleaned and result.requeue_after is None
    [patch] = patcher.patches
    assert patch[-1]["op"] == "remove"


async def test_the_reconciler_leaves_a_fresh_ledger_alone_until_its_timer() -> None:
    source = Source(replace(TWO, evictions=(entry("web-1", 5),)))
    patcher = Patcher()
    present = {"web-1": "uid-web-1"}
    result = await reconciler(source, patcher, lambda ns, n: present.get(n)).reconcile(
        ("default", "web")
    )
    assert patcher.patches == [] and not result.ledger_cleaned
    assert result.requeue_after == pytest.approx(10.0)  # the settle time


async def test_a_conflicting_clean_is_left_to_the_informer() -> None:
    source = Source(replace(TWO, evictions=(entry("web-1", 130),)))
    patcher = Patcher(failure=ApiError(status=Status(code=409, message="modified")))
    result = await reconciler(source, patcher).reconcile(("default", "web"))
    assert not result.ledger_cleaned and result.requeue_after is None


def test_a_full_ledger_holds_rather_than_let_a_pod_go_unrecorded() -> None:
    full = tuple(LedgerEntry(f"gone-{i}", f"uid-gone-{i}", NOW - timedelta(seconds=30))
                 for i in range(MAX_ENTRIES))  # fmt: skip
    held = decide_for(replace(TWO, evictions=full))
    assert (held.reason, held.allowed, held.record) == (Reason.WRITE_DEFERRED, False, None)
    assert f"holds {MAX_ENTRIES} pods let go" in held.message
    # expired entries do not count; a pod already recorded is not recorded again
    stale = tuple(msgspec.structs.replace(entry, at=NOW - ENTRY_LIFETIME) for entry in full)
    assert decide_for(replace(TWO, evictions=stale)).reason is Reason.READY_ELSEWHERE
    mine = (*full[1:], LedgerEntry(POD.name, POD.uid, NOW))
    assert decide_for(replace(TWO, evictions=mine)).reason is Reason.READY_ELSEWHERE
