"""The collectors: four signals, one deadline, every outcome evidence (never an exception)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graceful_drain.kube.owners import replicaset_from_pod_name
from graceful_drain.termination.budget import Deadline, pod_grace_period_seconds
from graceful_drain.termination.evidence import (
    EventsSnapshot,
    NodeSnapshot,
    OwnerRollout,
    PodSnapshot,
    Trigger,
    Unavailable,
    UnavailableReason,
)
from graceful_drain.termination.signals import (
    Collection,
    collect_evidence,
    events_field_selector,
)
from tests.unit.termination.fakes import (
    HANG,
    NAMESPACE,
    NODE,
    POD_NAME,
    REPLICASET,
    UID,
    FakeReader,
    Gate,
    deployment_obj,
    events_list,
    evicted_event,
    forbidden,
    identity,
    node_obj,
    not_found,
    pod_obj,
    replicaset_obj,
    run_in_virtual_time,
)

SHORT = 0.05  # a budget for reads that never answer; nothing asserts how long it took
LONG = 60.0  # a budget that must not be waited out


async def collect(reader: FakeReader, budget: float = LONG, **kwargs: Any) -> Collection:
    ident = kwargs.pop("ident", identity())
    clock = asyncio.get_running_loop().time if kwargs.pop("loop_clock", False) else None
    deadline = Deadline(budget) if clock is None else Deadline(budget, clock=clock)
    return await collect_evidence(reader, ident, deadline, **kwargs)


async def test_every_signal_is_read() -> None:
    reader = FakeReader(
        events=events_list(evicted_event()),
        node=node_obj("MemoryPressure"),
        deployments={"web": deployment_obj(restarted_at="2026-11-11T11:58:00Z")},
    )
    collection = await collect(reader)
    evidence = collection.evidence
    assert isinstance(evidence.pod, PodSnapshot) and evidence.pod.uid == UID
    assert isinstance(evidence.events, EventsSnapshot) and len(evidence.events.events) == 1
    assert isinstance(evidence.node, NodeSnapshot) and evidence.node.pressures()
    assert isinstance(evidence.owner, OwnerRollout) and evidence.owner.marker_present
    assert (evidence.pod_uid, evidence.trigger) == (UID, Trigger.SIGTERM)
    assert collection.timed_out == ()
    assert collection.pod_grace_period_seconds == 30
    assert sorted(reader.calls) == sorted(
        [
            ("get_pod", NAMESPACE, POD_NAME),
            ("list_events", NAMESPACE, f"involvedObject.uid={UID}"),
            ("get_node", NODE),
            ("get_replicaset", NAMESPACE, REPLICASET),
            ("get_deployment", NAMESPACE, "web"),
        ]
    )
    assert reader.cancelled == []


async def test_a_read_that_never_answers_times_out_and_is_cancelled() -> None:
    reader = FakeReader(events=HANG)
    collection = await collect(reader, SHORT)
    assert collection.evidence.events == Unavailable(
        UnavailableReason.TIMEOUT, f"no answer within the {SHORT:.2f}s detection deadline"
    )
    assert isinstance(collection.evidence.pod, PodSnapshot)
    assert collection.timed_out == ("events",)
    assert reader.cancelled == ["events"]


async def test_a_hanging_pod_read_times_out_pod_and_owner_only() -> None:
    reader = FakeReader(pod=HANG)
    collection = await collect(reader, SHORT)
    evidence = collection.evidence
    assert isinstance(evidence.pod, Unavailable) and isinstance(evidence.owner, Unavailable)
    assert evidence.pod.reason is evidence.owner.reason is UnavailableReason.TIMEOUT
    assert isinstance(evidence.node, NodeSnapshot)  # NODE_NAME was known: no need to wait
    assert set(collection.timed_out) == {"pod", "owner"}


def half_the_pods_grace(raw: object) -> float | None:
    grace = pod_grace_period_seconds(raw)
    return None if grace is None else grace * 0.5


async def test_a_pod_the_budget_callback_says_nothing_of_leaves_the_deadline_alone() -> None:
    reader = FakeReader(pod=pod_obj(deleted=True, deletion_grace=0))
    collection = await collect(reader, budget_for_pod=lambda raw: None)
    assert collection.budget_seconds == LONG
    assert collection.timed_out == ()


async def test_the_deadline_tightens_to_the_pods_own_grace_period() -> None:
    reader = FakeReader(pod=pod_obj(deleted=True, deletion_grace=0), events=HANG)
    # A LONG budget that the pod's 0 s grace period must cut: waiting it out would fail.
    collection = await collect(reader, LONG, budget_for_pod=half_the_pods_grace)
    assert collection.pod_grace_period_seconds == 0
    assert collection.budget_seconds == 0.0
    assert collection.timed_out == ("events",)


async def test_another_incarnations_grace_period_is_not_used() -> None:
    reader = FakeReader(pod=pod_obj(uid="someone-else", grace=0))
    seen: list[object] = []

    def budget_for_pod(raw: object) -> float | None:
        seen.append(raw)
        return 0.0

    collection = await collect(reader, budget_for_pod=budget_for_pod)
    assert collection.pod_grace_period_seconds is None
    assert collection.budget_seconds == LONG
    assert seen == []  # another incarnation's object is never handed over


async def test_after_restart_reads_only_the_pod() -> None:
    reader = FakeReader()
    collection = await collect(reader, trigger=Trigger.AFTER_RESTART)
    assert reader.calls == [("get_pod", NAMESPACE, POD_NAME)]
    assert collection.evidence.trigger is Trigger.AFTER_RESTART
    assert isinstance(collection.evidence.events, Unavailable)


async def test_an_unexpected_reader_exception_is_evidence() -> None:
    reader = FakeReader(node=RuntimeError("boom"), pod=KeyError("kind"))
    evidence = (await collect(reader)).evidence
    assert evidence.node == Unavailable(UnavailableReason.ERROR, "RuntimeError: boom")
    assert evidence.pod == Unavailable(UnavailableReason.ERROR, "KeyError: 'kind'")


# --- the node ---------------------------------------------------------------------------


async def test_the_node_name_comes_from_the_pod_without_node_name() -> None:
    reader = FakeReader()
    evidence = (await collect(reader, ident=identity(node=None))).evidence
    assert isinstance(evidence.node, NodeSnapshot)
    assert ("get_node", NODE) in reader.calls


async def test_without_node_name_or_pod_the_node_is_unknown() -> None:
    reader = FakeReader(pod=forbidden())
    evidence = (await collect(reader, ident=identity(node=None))).evidence
    assert isinstance(evidence.node, Unavailable)
    assert evidence.node.reason is UnavailableReason.NOT_FOUND
    assert not any(call[0] == "get_node" for call in reader.calls)


async def test_a_forbidden_node_is_evidence() -> None:
    evidence = (await collect(FakeReader(node=forbidden("nodes")))).evidence
    assert evidence.node == Unavailable(UnavailableReason.FORBIDDEN, "HTTP 403: nodes")


# --- the owner --------------------------------------------------------------------------

MARKED = {"web": deployment_obj(restarted_at="2026-11-11T11:58:00Z")}


@pytest.mark.parametrize(
    ("reader", "owner"),
    [
        pytest.param(FakeReader(deployments=MARKED), "marker", id="pod-rs-deployment"),
        pytest.param(FakeReader(pod=pod_obj(owner=None)), "none", id="bare-pod"),
        pytest.param(
            FakeReader(replicasets={REPLICASET: replicaset_obj(deployment=None)}),
            "none",
            id="replicaset-without-deployment",
        ),
        pytest.param(FakeReader(replicasets={}), UnavailableReason.NOT_FOUND, id="replicaset-gone"),
        pytest.param(
            FakeReader(deployments={"web": forbidden()}),
            UnavailableReason.FORBIDDEN,
            id="deployment-forbidden",
        ),
        pytest.param(
            FakeReader(pod=not_found(), deployments=MARKED), "marker", id="pod-gone-name-guess"
        ),
        pytest.param(
            FakeReader(pod=pod_obj(uid="another-incarnation"), deployments=MARKED),
            "marker",
            id="other-incarnation-name-guess",
        ),
        pytest.param(
            FakeReader(pod=not_found(), replicasets={}),
            UnavailableReason.NOT_FOUND,
            id="pod-gone-guess-missing",
        ),
    ],
)
async def test_owner_resolution(reader: FakeReader, owner: object) -> None:
    found = (await collect(reader)).evidence.owner
    if owner == "marker":
        assert isinstance(found, OwnerRollout) and found.marker_present
        assert found.deployment == "web"
    elif owner == "none":
        assert found == OwnerRollout.no_deployment()
    else:
        assert isinstance(found, Unavailable) and found.reason is owner


async def test_an_ungenerated_pod_name_cannot_lead_to_an_owner() -> None:
    reader = FakeReader(pod=forbidden())
    found = (await collect(reader, ident=identity(name="web-0"))).evidence.owner
    assert isinstance(found, Unavailable) and found.reason is UnavailableReason.FORBIDDEN
    assert "not a ReplicaSet pod name" in found.detail
    assert not any(call[0] == "get_replicaset" for call in reader.calls)


@pytest.mark.parametrize(
    ("pod_name", "replicaset"),
    [
        ("web-6d4cf56db6-x7k2p", "web-6d4cf56db6"),
        ("a-b-c-7bbd8-zz2q9", "a-b-c-7bbd8"),
        ("web-6d4cf56db6-x7k2a", None),  # 'a' is not in the generator's alphabet
        ("web-6d4cf56db6-x7k2", None),  # four characters
        ("web-0", None),  # a StatefulSet ordinal
        ("web", None),
        ("-x7k2p", None),
    ],
)
def test_replicaset_name_from_pod_name(pod_name: str, replicaset: str | None) -> None:
    assert replicaset_from_pod_name(pod_name) == replicaset


def test_events_are_selected_by_uid_else_by_name() -> None:
    assert events_field_selector(identity()) == f"involvedObject.uid={UID}"
    assert events_field_selector(identity(uid=None)) == (
        f"involvedObject.kind=Pod,involvedObject.name={POD_NAME}"
    )


# --- properties -----------------------------------------------------------------------

BEHAVIOURS = st.sampled_from(["answer", "hang", "forbidden", "not_found", "crash"])


def scripted(behaviour: str, answer: object) -> object:
    return {
        "answer": answer,
        "hang": HANG,
        "forbidden": forbidden(),
        "not_found": not_found(),
        "crash": ValueError("bad body"),
    }[behaviour]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pod=BEHAVIOURS,
    events=BEHAVIOURS,
    node=BEHAVIOURS,
    rs=BEHAVIOURS,
    deployment=BEHAVIOURS,
)
def test_every_signal_is_a_snapshot_or_unavailable(
    pod: str, events: str, node: str, rs: str, deployment: str
) -> None:
    reader = FakeReader(
        pod=scripted(pod, pod_obj()),
        events=scripted(events, events_list()),
        node=scripted(node, node_obj()),
        replicasets={REPLICASET: scripted(rs, replicaset_obj())},
        deployments={"web": scripted(deployment, deployment_obj())},
    )
    # Virtual time: the deadline passes only once every read that can answer has, so a
    # loaded machine cannot make an answering read look hung.
    collection = run_in_virtual_time(collect(reader, 0.01, loop_clock=True))
    evidence = collection.evidence
    kinds = {
        "pod": (evidence.pod, PodSnapshot),
        "events": (evidence.events, EventsSnapshot),
        "node": (evidence.node, NodeSnapshot),
        "owner": (evidence.owner, OwnerRollout),
    }
    for name, (value, snapshot) in kinds.items():
        assert isinstance(value, snapshot | Unavailable), name
        if name in collection.timed_out:
            assert isinstance(value, Unavailable) and value.reason is UnavailableReason.TIMEOUT
    assert (pod == "hang") == ("pod" in collection.timed_out)
    assert (events == "hang") == ("events" in collection.timed_out)
    assert sorted(reader.cancelled) == sorted(set(reader.cancelled))  # each read cancelled once


async def test_a_gated_read_is_answered_once_opened() -> None:
    gate = Gate(pod_obj())
    reader = FakeReader(pod=gate)
    task = asyncio.create_task(collect(reader))
    await gate.reached.wait()
    assert not task.done()
    gate.opened.set()
    assert isinstance((await task).evidence.pod, PodSnapshot)


async def test_cancelling_the_collection_cancels_every_read() -> None:
    gate = Gate(HANG)
    reader = FakeReader(pod=gate, events=HANG, node=HANG)
    task = asyncio.create_task(collect(reader))
    await gate.reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Let the cancelled reads unwind (each records its cancellation).
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    if pending:
        await asyncio.wait(pending, timeout=LONG)
    assert sorted(reader.cancelled) == ["events", "node", "pod"]
