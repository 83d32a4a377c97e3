"""Table-driven tests of the termination-cause classifier (docs/termination-detector.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from graceful_drain.termination.classify import classify
from graceful_drain.termination.evidence import (
    ContainerTermination,
    DisruptionTargetCondition,
    EventRecord,
    EventsSnapshot,
    Evidence,
    NodeCondition,
    NodeSnapshot,
    NodeTaint,
    OwnerRollout,
    PodSnapshot,
    Trigger,
    Unavailable,
    UnavailableReason,
)
from graceful_drain.termination.kubelet import PressuredResource
from graceful_drain.termination.verdict import Action, Cause, Fact, Source, Verdict

UID = "0b6c3f7e-uid-ours"
OTHER_UID = "9d1a2b3c-uid-other"
NOW = datetime(2026, 11, 11, 12, 0, tzinfo=UTC)
GRACE = 30
TIMEOUT = Unavailable(UnavailableReason.TIMEOUT, "deadline")
GONE = Unavailable(UnavailableReason.NOT_FOUND, "HTTP 404")
FORBIDDEN = Unavailable(UnavailableReason.FORBIDDEN, "rbac")

# The seed's own example and other real kubelet formats (pkg/kubelet/eviction/helpers.go).
MEMORY_MSG = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 87Mi. "
DISK_MSG = (
    "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 2Gi. "
)
LOCAL_STORAGE_MSG = 'Container app exceeded its local ephemeral storage limit "1Gi". '
SHUTDOWN_MSG = "Pod was terminated in response to imminent node shutdown."
CRITICAL_MSG = "Preempted in order to admit critical pod"


# --- builders -------------------------------------------------------------------------


def condition(
    reason: str, message: str | None = None, status: str | None = "True"
) -> DisruptionTargetCondition:
    return DisruptionTargetCondition(status, reason, message, NOW - timedelta(seconds=5))


def pod(
    *,
    uid: str | None = UID,
    deleted: bool = False,
    target: DisruptionTargetCondition | None = None,
    reason: str | None = None,
    message: str | None = None,
    terminations: tuple[ContainerTermination, ...] = (),
) -> PodSnapshot:
    return PodSnapshot(
        uid=uid,
        name="web-7d9f-abcde",
        namespace="shop",
        node_name="node-a",
        deletion_timestamp=NOW + timedelta(seconds=GRACE) if deleted else None,
        deletion_grace_period_seconds=GRACE if deleted else None,
        disruption_target=target,
        phase="Failed" if reason else "Running",
        reason=reason,
        message=message,
        last_terminations=terminations,
        owner_replicaset="web-7d9f",
    )


def event(
    reason: str,
    *,
    uid: str | None = UID,
    source: str | None = "kubelet",
    type_: str | None = "Warning",
    message: str | None = None,
    starved: str | None = None,
    action: str | None = None,
) -> EventRecord:
    return EventRecord(
        reason=reason,
        type=type_,
        source_component=source,
        involved_uid=uid,
        involved_kind="Pod",
        involved_name="web-7d9f-abcde",
        message=message,
        action=action,
        starved_resource=starved,
        last_timestamp=NOW - timedelta(seconds=3),
    )


def evicted(
    message: str = MEMORY_MSG,
    *,
    uid: str = UID,
    source: str = "kubelet",
    type_: str | None = "Warning",
    starved: str | None = None,
) -> EventRecord:
    return event("Evicted", uid=uid, source=source, type_=type_, message=message, starved=starved)


def karpenter_evicted(uid: str = UID) -> EventRecord:
    """Karpenter's record of its Eviction API call (terminator/events/events.go, EvictPod)."""
    return event("Evicted", uid=uid, source="karpenter", type_="Normal", message="Evicted pod")


def scheduler_preempted(uid: str = UID) -> EventRecord:
    return event(
        "Preempted",
        uid=uid,
        source="default-scheduler",
        type_="Normal",
        action="Preempting",
        message="Preempted by pod 1234 on node node-a",
    )


def kubelet_preempting(source: str = "kubelet") -> EventRecord:
    return event("Preempting", source=source, message=CRITICAL_MSG)


def events(*records: EventRecord) -> EventsSnapshot:
    return EventsSnapshot(records)


def node(*conditions: str, taints: tuple[str, ...] = (), status: str = "True") -> NodeSnapshot:
    return NodeSnapshot(
        "node-a",
        (*(NodeCondition(c, status) for c in conditions), NodeCondition("Ready", "True")),
        tuple(NodeTaint(t, "NoSchedule") for t in taints),
    )


NO_EVENTS = EventsSnapshot()
QUIET_NODE = NodeSnapshot("node-a", (NodeCondition("MemoryPressure", "False"),))
MARKER = OwnerRollout("web", "2026-11-11T11:58:00Z", NOW - timedelta(minutes=2))
NO_MARKER = OwnerRollout("web")


def evidence(
    *,
    uid: str | None = UID,
    pod: PodSnapshot | Unavailable = TIMEOUT,
    events: EventsSnapshot | Unavailable = NO_EVENTS,
    node: NodeSnapshot | Unavailable = QUIET_NODE,
    owner: OwnerRollout | Unavailable = NO_MARKER,
    trigger: Trigger = Trigger.SIGTERM,
) -> Evidence:
    return Evidence(uid, pod, events, node, owner, trigger)


@dataclass(frozen=True)
class Case:
    name: str
    evidence: Evidence
    cause: Cause
    decided_by: Source
    fact: Fact
    resource: PressuredResource | None = None
    grace: int = GRACE
    retention: int = 3600
    also: tuple[Fact, ...] = field(default=())  # further facts the evidence must mention
    rollout_timeout: timedelta = timedelta(minutes=10)  # the controller's default

    @property
    def action(self) -> Action:
        if self.evidence.trigger is Trigger.AFTER_RESTART:
            return Action.REPORT_ONLY
        if self.cause is Cause.VOLUNTARY:
            return Action.DRAIN_GRACEFULLY
        return Action.SHED_LOAD_AND_EXIT_FAST


def run(case: Case) -> Verdict:
    return classify(case.evidence, NOW, case.grace, case.retention, case.rollout_timeout)


def check(case: Case) -> None:
    verdict = run(case)
    got = (verdict.cause, verdict.action, verdict.resource, verdict.decided_by)
    assert got == (case.cause, case.action, case.resource, case.decided_by), verdict.to_json()
    decisive = verdict.deciding_item
    assert decisive.fact is case.fact, verdict.to_json()
    assert decisive.source is verdict.decided_by
    assert decisive.detail
    facts = {item.fact for item in verdict.evidence}
    assert set(case.also) <= facts, verdict.to_json()
    assert Fact.CLASSIFIER_ERROR not in facts
    if case.evidence.trigger is Trigger.SIGTERM:
        # Every signal is accounted for, readable or not.
        assert {Source.POD, Source.EVENTS, Source.NODE, Source.OWNER} <= {
            item.source for item in verdict.evidence
        }


# --- tier 1: the pod's own object -----------------------------------------------------

TIER_1 = [
    Case(
        "DisruptionTarget EvictionByEvictionAPI is voluntary",
        evidence(pod=pod(deleted=True, target=condition("EvictionByEvictionAPI"))),
        Cause.VOLUNTARY,
        Source.POD,
        Fact.DISRUPTION_TARGET,
    ),
    Case(
        "EvictionByEvictionAPI before deletionTimestamp lands is still voluntary",
        evidence(pod=pod(target=condition("EvictionByEvictionAPI"))),
        Cause.VOLUNTARY,
        Source.POD,
        Fact.DISRUPTION_TARGET,
    ),
    Case(
        "DisruptionTarget PreemptionByScheduler is preempted",
        evidence(pod=pod(deleted=True, target=condition("PreemptionByScheduler"))),
        Cause.PREEMPTED,
        Source.POD,
        Fact.DISRUPTION_TARGET,
    ),
    Case(
        "DisruptionTarget DeletionByTaintManager is involuntary",
        evidence(pod=pod(deleted=True, target=condition("DeletionByTaintManager"))),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.DISRUPTION_TARGET,
    ),
    Case(
        "DisruptionTarget DeletionByPodGC is involuntary",
        evidence(pod=pod(deleted=True, target=condition("DeletionByPodGC"))),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.DISRUPTION_TARGET,
    ),
    Case(
        "TerminationByKubelet with status Evicted names the resource",
        evidence(
            pod=pod(
                target=condition("TerminationByKubelet", MEMORY_MSG),
                reason="Evicted",
                message=MEMORY_MSG,
            )
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.DISRUPTION_TARGET,
        PressuredResource.MEMORY,
        also=(Fact.KUBELET_STATUS,),
    ),
    Case(
        "TerminationByKubelet before the status reason lands: resource from the condition",
        evidence(pod=pod(target=condition("TerminationByKubelet", DISK_MSG))),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.DISRUPTION_TARGET,
        PressuredResource.EPHEMERAL_STORAGE,
    ),
    Case(
        "TerminationByKubelet for a node shutdown is involuntary without a resource",
        evidence(
            pod=pod(
                target=condition("TerminationByKubelet", SHUTDOWN_MSG),
                reason="Terminated",
                message=SHUTDOWN_MSG,
            )
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.DISRUPTION_TARGET,
    ),
    Case(
        "TerminationByKubelet for a critical-pod preemption is preempted",
        evidence(
            pod=pod(
                target=condition("TerminationByKubelet", CRITICAL_MSG),
                reason="Preempting",
                message=CRITICAL_MSG,
            )
        ),
        Cause.PREEMPTED,
        Source.POD,
        Fact.DISRUPTION_TARGET,
    ),
    Case(
        "TerminationByKubelet with nothing else is involuntary",
        evidence(pod=pod(target=condition("TerminationByKubelet"))),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.DISRUPTION_TARGET,
    ),
    Case(
        "an unrecognised DisruptionTarget reason rules out the deletionTimestamp voluntary reading",
        evidence(pod=pod(deleted=True, target=condition("DeletionByDeviceTaintManager"))),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.DISRUPTION_TARGET,),
    ),
    Case(
        "deletionTimestamp without DisruptionTarget is voluntary (delete, rollout, scale-down)",
        evidence(pod=pod(deleted=True)),
        Cause.VOLUNTARY,
        Source.POD,
        Fact.DELETION_REQUESTED,
    ),
    Case(
        "a DisruptionTarget that is not True is ignored",
        evidence(pod=pod(deleted=True, target=condition("PreemptionByScheduler", status="False"))),
        Cause.VOLUNTARY,
        Source.POD,
        Fact.DELETION_REQUESTED,
    ),
    Case(
        "kubelet status Evicted without a condition (local-storage limit) is involuntary",
        evidence(pod=pod(reason="Evicted", message=LOCAL_STORAGE_MSG)),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.KUBELET_STATUS,
        PressuredResource.EPHEMERAL_STORAGE,
    ),
    Case(
        "kubelet status Preempting without a condition is preempted",
        evidence(pod=pod(reason="Preempting", message=CRITICAL_MSG)),
        Cause.PREEMPTED,
        Source.POD,
        Fact.KUBELET_STATUS,
    ),
    Case(
        "kubelet node-shutdown status without a condition is involuntary",
        evidence(pod=pod(reason="Terminated", message=SHUTDOWN_MSG)),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.KUBELET_STATUS,
    ),
    Case(
        "deletionTimestamp unset and nothing else: kubelet-initiated, cause unknown",
        evidence(pod=pod()),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.KUBELET_INITIATED, Fact.NO_EVICTED_EVENT, Fact.NODE_NO_PRESSURE),
    ),
]

# --- tier 2: events for this UID ------------------------------------------------------

TIER_2 = [
    Case(
        "kubelet Warning Evicted for this UID is involuntary, resource from the message",
        evidence(events=events(evicted())),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
        also=(Fact.POD_UNAVAILABLE,),
    ),
    Case(
        "kubelet Evicted decides a kubelet-initiated pod; starved_resource annotation wins",
        evidence(pod=pod(), events=events(evicted(message="garbled", starved="pids"))),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.PID,
    ),
    Case(
        "the newest Evicted event names the resource",
        evidence(
            events=events(
                evicted(DISK_MSG)._replace(last_timestamp=NOW - timedelta(seconds=50)),
                evicted(MEMORY_MSG),
            )
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
    ),
    Case(
        "scheduler Preempted (action Preempting) for this UID is preempted",
        evidence(events=events(scheduler_preempted())),
        Cause.PREEMPTED,
        Source.EVENTS,
        Fact.PREEMPTION_EVENT,
    ),
    Case(
        "kubelet Preempting for this UID is preempted",
        evidence(pod=pod(), events=events(kubelet_preempting())),
        Cause.PREEMPTED,
        Source.EVENTS,
        Fact.PREEMPTION_EVENT,
    ),
    Case(
        "a kubelet Evicted event of type Normal is the kubelet's eviction all the same (v3)",
        evidence(events=events(evicted(type_="Normal"))),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
    ),
    Case(
        "a kubelet Evicted event with no type is the kubelet's eviction (v3)",
        evidence(events=events(evicted(type_=None))),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
    ),
    *(
        Case(
            f"an Evicted event from source {source!r} counts whatever its source (v4)",
            evidence(pod=pod(deleted=True), events=events(evicted(source=source))),
            Cause.INVOLUNTARY_EVICTION,
            Source.EVENTS,
            Fact.KUBELET_EVICTED_EVENT,
            PressuredResource.MEMORY,
            also=(Fact.KUBELET_EVICTION_OVERRIDE,),
        )
        for source in ("Kubelet", "KUBELET", "descheduler", "", "karpenter")
    ),
    Case(
        "Karpenter's Normal 'Evicted pod' beside DisruptionTarget EvictionByEvictionAPI: a drain",
        evidence(
            pod=pod(deleted=True, target=condition("EvictionByEvictionAPI")),
            events=events(karpenter_evicted()),
        ),
        Cause.VOLUNTARY,
        Source.POD,
        Fact.DISRUPTION_TARGET,
        also=(Fact.OTHER_EVICTED_EVENT,),
    ),
    Case(
        "Karpenter's Normal 'Evicted pod' without the pod's Eviction API record: an eviction",
        evidence(pod=pod(deleted=True), events=events(karpenter_evicted())),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.OTHER,
    ),
    *(
        Case(
            f"an Evicted event shaped like Karpenter's but {why} is an eviction",
            evidence(
                pod=pod(deleted=True, target=condition("EvictionByEvictionAPI")),
                events=events(changed),
            ),
            Cause.INVOLUNTARY_EVICTION,
            Source.EVENTS,
            Fact.KUBELET_EVICTED_EVENT,
            changed_resource,
        )
        for why, changed, changed_resource in (
            ("a Warning", karpenter_evicted()._replace(type="Warning"), PressuredResource.OTHER),
            ("with no type", karpenter_evicted()._replace(type=None), PressuredResource.OTHER),
            (
                "from the kubelet",
                karpenter_evicted()._replace(source_component="kubelet"),
                PressuredResource.OTHER,
            ),
            (
                "with a kubelet message",
                karpenter_evicted()._replace(message=MEMORY_MSG),
                PressuredResource.MEMORY,
            ),
        )
    ),
    Case(
        "events for another UID are not ours",
        evidence(events=events(evicted(uid=OTHER_UID), scheduler_preempted(OTHER_UID))),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
    ),
    Case(
        "Preempting from something other than the kubelet still counts (v4)",
        evidence(events=events(kubelet_preempting(source="my-operator"))),
        Cause.PREEMPTED,
        Source.EVENTS,
        Fact.PREEMPTION_EVENT,
    ),
    Case(
        "events unreadable: nothing to decide on",
        evidence(events=FORBIDDEN),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.EVENTS_UNAVAILABLE,),
    ),
]

# --- tier 3: node pressure, corroboration only ----------------------------------------

TIER_3 = [
    Case(
        "MemoryPressure upgrades an otherwise-unknown case to involuntary/memory",
        evidence(node=node("MemoryPressure")),
        Cause.INVOLUNTARY_EVICTION,
        Source.NODE,
        Fact.NODE_PRESSURE,
        PressuredResource.MEMORY,
    ),
    Case(
        "a kubelet-initiated pod on a pressured node is involuntary",
        evidence(pod=pod(), node=node("PIDPressure")),
        Cause.INVOLUNTARY_EVICTION,
        Source.NODE,
        Fact.NODE_PRESSURE,
        PressuredResource.PID,
        also=(Fact.KUBELET_INITIATED,),
    ),
    Case(
        "a disk-pressure taint alone counts as pressure",
        evidence(node=node(taints=("node.kubernetes.io/disk-pressure",))),
        Cause.INVOLUNTARY_EVICTION,
        Source.NODE,
        Fact.NODE_PRESSURE,
        PressuredResource.EPHEMERAL_STORAGE,
    ),
    Case(
        "several pressures: memory first",
        evidence(node=node("PIDPressure", "DiskPressure", "MemoryPressure")),
        Cause.INVOLUNTARY_EVICTION,
        Source.NODE,
        Fact.NODE_PRESSURE,
        PressuredResource.MEMORY,
    ),
    Case(
        "pressure conditions that are False are no pressure",
        evidence(node=node("MemoryPressure", "DiskPressure", status="False")),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.NODE_NO_PRESSURE,),
    ),
    Case(
        "node unreadable: nothing to corroborate",
        evidence(node=TIMEOUT),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.NODE_UNAVAILABLE,),
    ),
]

# --- tier 4: graceful-drain's rollout marker ------------------------------------------

TIER_4 = [
    Case(
        "rollout marker, pod gone (404), informative absence of Evicted: voluntary",
        evidence(pod=GONE, owner=MARKER),
        Cause.VOLUNTARY,
        Source.OWNER,
        Fact.ROLLOUT_MARKER,
        also=(Fact.NO_EVICTED_EVENT,),
    ),
    Case(
        "rollout marker, pod read timed out: proves nothing (v4)",
        evidence(owner=MARKER),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.ROLLOUT_MARKER,),
    ),
    Case(
        "rollout marker with the node unreadable: pressure not excluded (v4)",
        evidence(pod=GONE, owner=MARKER, node=TIMEOUT),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CANNOT_DETERMINE,
        also=(Fact.ROLLOUT_MARKER,),
    ),
    Case(
        "rollout marker but events unreadable: a kubelet eviction is not excluded",
        evidence(owner=MARKER, events=TIMEOUT),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.ROLLOUT_MARKER,),
    ),
    Case(
        "rollout marker but a readable kubelet-initiated pod: the pod is authoritative",
        evidence(owner=MARKER, pod=pod()),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.ROLLOUT_MARKER, Fact.KUBELET_INITIATED),
    ),
    Case(
        "no owning Deployment: no marker",
        evidence(owner=OwnerRollout.no_deployment()),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.NO_OWNING_DEPLOYMENT,),
    ),
    Case(
        "owner unreadable: no marker",
        evidence(owner=FORBIDDEN),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.OWNER_UNAVAILABLE,),
    ),
]

# --- identity and the fallback --------------------------------------------------------

FALLBACK = [
    Case(
        "nothing readable in time: conservative fallback",
        Evidence.nothing_readable(UID, TIMEOUT),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(
            Fact.POD_UNAVAILABLE,
            Fact.EVENTS_UNAVAILABLE,
            Fact.NODE_UNAVAILABLE,
            Fact.OWNER_UNAVAILABLE,
        ),
    ),
    Case(
        "a pod object with another UID is ignored",
        evidence(pod=pod(uid=OTHER_UID, deleted=True)),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.POD_UID_MISMATCH,),
    ),
    Case(
        "our UID unknown: neither the pod object nor events can be attributed",
        evidence(uid=None, pod=pod(deleted=True), events=events(evicted()), owner=MARKER),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.POD_UID_UNKNOWN, Fact.EVENTS_UNATTRIBUTABLE),
    ),
    Case(
        "an empty UID is an unknown UID",
        evidence(uid="", pod=pod(uid="", deleted=True)),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.POD_UID_UNKNOWN,),
    ),
]


@pytest.mark.parametrize("case", TIER_1, ids=lambda c: c.name)
def test_tier_1_pod_object(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", TIER_2, ids=lambda c: c.name)
def test_tier_2_events(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", TIER_3, ids=lambda c: c.name)
def test_tier_3_node_pressure(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", TIER_4, ids=lambda c: c.name)
def test_tier_4_rollout_marker(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", FALLBACK, ids=lambda c: c.name)
def test_identity_and_fallback(case: Case) -> None:
    check(case)


# --- priority: a higher tier beats a lower one that disagrees -------------------------

PRIORITY = [
    Case(
        "the eviction event first: a kubelet Evicted event over PreemptionByScheduler (v4)",
        evidence(
            pod=pod(deleted=True, target=condition("PreemptionByScheduler")),
            events=events(evicted()),
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
        also=(Fact.DISRUPTION_TARGET,),
    ),
    Case(
        "node pressure before voluntary signals: MemoryPressure over a deletion (v4)",
        evidence(pod=pod(deleted=True), node=node("MemoryPressure")),
        Cause.INVOLUNTARY_EVICTION,
        Source.NODE,
        Fact.NODE_PRESSURE,
        PressuredResource.MEMORY,
        also=(Fact.NODE_PRESSURE_OVERRIDE, Fact.DELETION_REQUESTED),
    ),
    Case(
        "node pressure before voluntary signals: a taint over EvictionByEvictionAPI (v4)",
        evidence(
            pod=pod(deleted=True, target=condition("EvictionByEvictionAPI")),
            node=node(taints=("node.kubernetes.io/disk-pressure",)),
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.NODE,
        Fact.NODE_PRESSURE,
        PressuredResource.EPHEMERAL_STORAGE,
        also=(Fact.NODE_PRESSURE_OVERRIDE,),
    ),
    Case(
        "1 beats 3: the condition's resource, not the node's",
        evidence(
            pod=pod(target=condition("TerminationByKubelet", DISK_MSG)),
            node=node("MemoryPressure"),
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.DISRUPTION_TARGET,
        PressuredResource.EPHEMERAL_STORAGE,
    ),
    Case(
        "1 beats 4: DeletionByTaintManager over the rollout marker",
        evidence(pod=pod(deleted=True, target=condition("DeletionByTaintManager")), owner=MARKER),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.DISRUPTION_TARGET,
        also=(Fact.ROLLOUT_MARKER,),
    ),
    Case(
        "2 beats 3: the Evicted event's resource, not the node's",
        evidence(events=events(evicted(MEMORY_MSG)), node=node("DiskPressure")),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
    ),
    Case(
        "node pressure before other records: MemoryPressure over a Preempted event (v4)",
        evidence(events=events(scheduler_preempted()), node=node("MemoryPressure")),
        Cause.INVOLUNTARY_EVICTION,
        Source.NODE,
        Fact.NODE_PRESSURE,
        PressuredResource.MEMORY,
        also=(Fact.PREEMPTION_EVENT,),
    ),
    Case(
        "2 beats 4: a kubelet Evicted event over the rollout marker",
        evidence(events=events(evicted()), owner=MARKER),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
    ),
    Case(
        "2 beats 4: a Preempted event over the rollout marker",
        evidence(events=events(scheduler_preempted()), owner=MARKER),
        Cause.PREEMPTED,
        Source.EVENTS,
        Fact.PREEMPTION_EVENT,
    ),
    Case(
        "3 beats 4: node pressure over the rollout marker",
        evidence(node=node("MemoryPressure"), owner=MARKER),
        Cause.INVOLUNTARY_EVICTION,
        Source.NODE,
        Fact.NODE_PRESSURE,
        PressuredResource.MEMORY,
        also=(Fact.ROLLOUT_MARKER,),
    ),
    Case(
        "within tier 2: a kubelet Evicted beats a Preempted event",
        evidence(events=events(scheduler_preempted(), evicted())),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
    ),
]

# The documented exception: a kubelet eviction or a preemption record for this UID is
# never outranked into a drain (see the classify module docstring for why).
OVERRIDE = [
    Case(
        "EvictionByEvictionAPI + scheduler Preempted event: the preemption wins (v2)",
        evidence(
            pod=pod(deleted=True, target=condition("EvictionByEvictionAPI")),
            events=events(scheduler_preempted()),
        ),
        Cause.PREEMPTED,
        Source.EVENTS,
        Fact.PREEMPTION_EVENT,
        also=(Fact.PREEMPTION_OVERRIDE, Fact.DISRUPTION_TARGET),
    ),
    Case(
        "deletionTimestamp + scheduler Preempted event: the preemption wins (v2)",
        evidence(pod=pod(deleted=True), events=events(scheduler_preempted())),
        Cause.PREEMPTED,
        Source.EVENTS,
        Fact.PREEMPTION_EVENT,
        also=(Fact.PREEMPTION_OVERRIDE, Fact.DELETION_REQUESTED),
    ),
    Case(
        "EvictionByEvictionAPI + Preempted + kubelet Evicted: the kubelet's record first",
        evidence(
            pod=pod(deleted=True, target=condition("EvictionByEvictionAPI")),
            events=events(scheduler_preempted(), evicted()),
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
        also=(Fact.KUBELET_EVICTION_OVERRIDE, Fact.PREEMPTION_EVENT),
    ),
    Case(
        "EvictionByEvictionAPI + kubelet Evicted event: the kubelet's record wins",
        evidence(
            pod=pod(deleted=True, target=condition("EvictionByEvictionAPI")),
            events=events(evicted()),
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
        also=(Fact.KUBELET_EVICTION_OVERRIDE, Fact.DISRUPTION_TARGET),
    ),
    Case(
        "deletionTimestamp + kubelet Evicted event: the kubelet's record wins",
        evidence(pod=pod(deleted=True), events=events(evicted(DISK_MSG))),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.EPHEMERAL_STORAGE,
        also=(Fact.KUBELET_EVICTION_OVERRIDE, Fact.DELETION_REQUESTED),
    ),
    Case(
        "EvictionByEvictionAPI over a kubelet status Evicted: the kubelet's record wins",
        evidence(
            pod=pod(
                deleted=True,
                target=condition("EvictionByEvictionAPI"),
                reason="Evicted",
                message=MEMORY_MSG,
            )
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.KUBELET_STATUS,
        PressuredResource.MEMORY,
        also=(Fact.KUBELET_EVICTION_OVERRIDE,),
    ),
    Case(
        "EvictionByEvictionAPI beside a kubelet status Preempting: the kubelet's record (v3)",
        evidence(
            pod=pod(
                deleted=True,
                target=condition("EvictionByEvictionAPI"),
                reason="Preempting",
                message=CRITICAL_MSG,
            )
        ),
        Cause.PREEMPTED,
        Source.POD,
        Fact.KUBELET_STATUS,
        also=(Fact.PREEMPTION_OVERRIDE, Fact.DISRUPTION_TARGET),
    ),
    Case(
        "EvictionByEvictionAPI beside a node-shutdown status: the kubelet's record (v3)",
        evidence(
            pod=pod(
                deleted=True,
                target=condition("EvictionByEvictionAPI"),
                reason="Terminated",
                message=SHUTDOWN_MSG,
            )
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.KUBELET_STATUS,
        also=(Fact.KUBELET_TERMINATION_OVERRIDE, Fact.DISRUPTION_TARGET),
    ),
    Case(
        "deletionTimestamp beside a node-shutdown status: the kubelet's record (v3)",
        evidence(pod=pod(deleted=True, reason="Terminated", message=SHUTDOWN_MSG)),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.KUBELET_STATUS,
    ),
    Case(
        "rollout marker + kubelet Evicted event of type Normal: the kubelet's record (v3)",
        evidence(owner=MARKER, events=events(evicted(type_="Normal"))),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
        also=(Fact.ROLLOUT_MARKER,),
    ),
    Case(
        "deletionTimestamp + kubelet status Evicted (pre-DisruptionTarget cluster)",
        evidence(pod=pod(deleted=True, reason="Evicted", message=MEMORY_MSG)),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.KUBELET_STATUS,
        PressuredResource.MEMORY,
    ),
]


# --- malformed evidence fails closed (v3) ----------------------------------------------

MALFORMED_EVENTS = Unavailable(UnavailableReason.ERROR, "the events list answer is malformed")


def marker(raw: str | None, parsed: datetime | None) -> OwnerRollout:
    return OwnerRollout("web", raw, parsed)


MALFORMED = [
    Case(
        "an events answer without items is unavailable: the marker is not trusted alone",
        evidence(owner=MARKER, events=MALFORMED_EVENTS),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.EVENTS_UNAVAILABLE, Fact.ROLLOUT_MARKER),
    ),
    Case(
        "a restarted-at that is not a time is no marker",
        evidence(owner=marker("not-a-time", None)),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.ROLLOUT_MARKER_REJECTED,),
    ),
    Case(
        "a restarted-at of 1970 is no marker: older than the rollout timeout",
        evidence(owner=marker("1970-01-01T00:00:00Z", datetime(1970, 1, 1, tzinfo=UTC))),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.ROLLOUT_MARKER_REJECTED,),
    ),
    Case(
        "a restarted-at of the year 3000 is no marker: further ahead than the timeout",
        evidence(owner=marker("3000-01-01T00:00:00Z", datetime(3000, 1, 1, tzinfo=UTC))),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.ROLLOUT_MARKER_REJECTED,),
    ),
    Case(
        "a restarted-at just older than a configured 1m rollout timeout is no marker",
        evidence(owner=MARKER),  # two minutes old
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.ROLLOUT_MARKER_REJECTED,),
        rollout_timeout=timedelta(minutes=1),
    ),
    Case(
        "a restarted-at a little ahead of now (clock skew) is a marker",
        evidence(pod=GONE, owner=marker("2026-11-11T12:00:30Z", NOW + timedelta(seconds=30))),
        Cause.VOLUNTARY,
        Source.OWNER,
        Fact.ROLLOUT_MARKER,
    ),
    Case(
        'DisruptionTarget status "Unknown" + TerminationByKubelet + deletionTimestamp: no drain',
        evidence(pod=pod(deleted=True, target=condition("TerminationByKubelet", status="Unknown"))),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.DISRUPTION_TARGET_NOT_TRUE,),
    ),
    Case(
        'DisruptionTarget status "true" (not the API\'s "True") + deletionTimestamp: no drain',
        evidence(pod=pod(deleted=True, target=condition("TerminationByKubelet", status="true"))),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.DISRUPTION_TARGET_NOT_TRUE,),
    ),
    Case(
        "DisruptionTarget with a boolean status + EvictionByEvictionAPI: not a drain",
        evidence(pod=pod(deleted=True, target=condition("EvictionByEvictionAPI", status="true"))),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.DISRUPTION_TARGET_NOT_TRUE,),
    ),
    Case(
        "DisruptionTarget without a status + deletionTimestamp: no drain",
        evidence(pod=pod(deleted=True, target=condition("DeletionByPodGC", status=None))),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.DISRUPTION_TARGET_NOT_TRUE,),
    ),
    Case(
        "DisruptionTarget status Unknown with a kubelet eviction message: an eviction",
        evidence(
            pod=pod(
                deleted=True,
                target=condition("TerminationByKubelet", MEMORY_MSG, status="Unknown"),
            )
        ),
        Cause.INVOLUNTARY_EVICTION,
        Source.POD,
        Fact.KUBELET_STATUS,
        PressuredResource.MEMORY,
    ),
    Case(
        'DisruptionTarget "False" (withdrawn) + deletionTimestamp: a deletion, a drain',
        evidence(pod=pod(deleted=True, target=condition("TerminationByKubelet", status="False"))),
        Cause.VOLUNTARY,
        Source.POD,
        Fact.DELETION_REQUESTED,
        also=(Fact.DISRUPTION_TARGET_NOT_TRUE,),
    ),
]


@pytest.mark.parametrize("case", MALFORMED, ids=lambda c: c.name)
def test_malformed_evidence_fails_closed(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", PRIORITY, ids=lambda c: c.name)
def test_higher_tier_beats_lower_tier(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", OVERRIDE, ids=lambda c: c.name)
def test_a_kubelet_eviction_or_a_preemption_is_never_outranked_into_a_drain(case: Case) -> None:
    check(case)


# --- the retention rule ---------------------------------------------------------------

RETENTION = [
    Case(
        "grace within retention: absence of Evicted is informative, the marker is trusted",
        evidence(pod=GONE, owner=MARKER),
        Cause.VOLUNTARY,
        Source.OWNER,
        Fact.ROLLOUT_MARKER,
        grace=30,
        retention=3600,
    ),
    Case(
        "grace equal to retention is still within it",
        evidence(pod=GONE, owner=MARKER),
        Cause.VOLUNTARY,
        Source.OWNER,
        Fact.ROLLOUT_MARKER,
        grace=3600,
        retention=3600,
    ),
    Case(
        "grace past retention: absence of Evicted is uninformative, the marker is not enough",
        evidence(pod=GONE, owner=MARKER),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CANNOT_DETERMINE,
        grace=3601,
        retention=3600,
    ),
    Case(
        "no retention at all: absence is uninformative",
        evidence(pod=GONE, owner=MARKER),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CANNOT_DETERMINE,
        grace=0,
        retention=0,
    ),
    Case(
        "a negative grace period counts as zero",
        evidence(pod=GONE, owner=MARKER),
        Cause.VOLUNTARY,
        Source.OWNER,
        Fact.ROLLOUT_MARKER,
        grace=-5,
        retention=10,
    ),
    Case(
        "past retention a present Evicted event still decides",
        evidence(events=events(evicted()), owner=MARKER),
        Cause.INVOLUNTARY_EVICTION,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        PressuredResource.MEMORY,
        grace=7200,
        retention=3600,
    ),
    Case(
        "past retention a deletion cannot be told from an eviction whose event expired (v4)",
        evidence(pod=pod(deleted=True)),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CANNOT_DETERMINE,
        grace=7200,
        retention=3600,
        also=(Fact.DELETION_REQUESTED,),
    ),
    Case(
        "a grace period one second past the events' retention: cannot determine (v4)",
        evidence(pod=pod(deleted=True, target=condition("EvictionByEvictionAPI"))),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CANNOT_DETERMINE,
        grace=3601,
        retention=3600,
    ),
]


@pytest.mark.parametrize("case", RETENTION, ids=lambda c: c.name)
def test_retention_rule(case: Case) -> None:
    check(case)


@pytest.mark.parametrize(("grace", "informative"), [(30, "true"), (3601, "false")])
def test_absence_item_says_whether_it_is_informative(grace: int, informative: str) -> None:
    verdict = classify(evidence(), NOW, grace, 3600)
    [absence] = [i for i in verdict.evidence if i.fact is Fact.NO_EVICTED_EVENT]
    assert dict(absence.values)["informative"] == informative


# --- OOM kills: context at SIGTERM, the cause after a restart -------------------------


def oom(container: str, seconds_ago: int) -> ContainerTermination:
    return ContainerTermination(container, "OOMKilled", 137, NOW - timedelta(seconds=seconds_ago))


def crashed(container: str) -> ContainerTermination:
    return ContainerTermination(container, "Error", 1, NOW - timedelta(seconds=60))


OOM = [
    Case(
        "at SIGTERM an earlier OOM kill is context, not the cause",
        evidence(pod=pod(deleted=True, terminations=(oom("app", 600),))),
        Cause.VOLUNTARY,
        Source.POD,
        Fact.DELETION_REQUESTED,
        also=(Fact.CONTAINER_OOM_KILLED,),
    ),
    Case(
        "after a restart, lastState OOMKilled is reported",
        evidence(pod=pod(terminations=(oom("app", 30),)), trigger=Trigger.AFTER_RESTART),
        Cause.OOM_KILLED,
        Source.POD,
        Fact.CONTAINER_OOM_KILLED,
    ),
    Case(
        "after a restart, any OOM-killed container is reported",
        evidence(
            pod=pod(terminations=(crashed("sidecar"), oom("app", 30))),
            trigger=Trigger.AFTER_RESTART,
        ),
        Cause.OOM_KILLED,
        Source.POD,
        Fact.CONTAINER_OOM_KILLED,
        also=(Fact.CONTAINER_TERMINATED,),
    ),
    Case(
        "after a restart without an OOM kill the cause is not classified",
        evidence(pod=pod(terminations=(crashed("app"),)), trigger=Trigger.AFTER_RESTART),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.CONTAINER_TERMINATED,),
    ),
    Case(
        "after a restart with an unreadable pod",
        evidence(trigger=Trigger.AFTER_RESTART),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.POD_UNAVAILABLE,),
    ),
    Case(
        "after a restart another incarnation's OOM kill is not ours",
        evidence(
            pod=pod(uid=OTHER_UID, terminations=(oom("app", 30),)), trigger=Trigger.AFTER_RESTART
        ),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
        also=(Fact.POD_UID_MISMATCH,),
    ),
    Case(
        "after a restart the kubelet's eviction signals are not consulted",
        evidence(
            pod=pod(),
            events=events(evicted()),
            node=node("MemoryPressure"),
            trigger=Trigger.AFTER_RESTART,
        ),
        Cause.INDETERMINATE,
        Source.CLASSIFIER,
        Fact.CONSERVATIVE_FALLBACK,
    ),
]


@pytest.mark.parametrize("case", OOM, ids=lambda c: c.name)
def test_oom_kills(case: Case) -> None:
    check(case)


def test_latest_oom_kill_is_the_decisive_one() -> None:
    verdict = classify(
        evidence(
            pod=pod(terminations=(oom("old", 900), oom("new", 10))),
            trigger=Trigger.AFTER_RESTART,
        ),
        NOW,
        GRACE,
    )
    assert dict(verdict.deciding_item.values)["container"] == "new"


# --- the seed's classify_termination, ported ------------------------------------------


@dataclass(frozen=True)
class SeedCase:
    """A seed ``TerminationSignal`` and the seed's answer, next to ours.

    The seed reads no pod object ("the pod object itself is deleted"), no owner,
    and its events are the UIDs of recent Evicted events.  ``seed`` is what
    ``on_sigterm`` returns (the seed raises EvictionIndeterminateError past
    retention and maps it to shed load).
    """

    name: str
    evicted_uids: frozenset[str]
    node_conditions: dict[str, str]
    grace: int
    seed_cause: str
    seed_action: str
    cause: Cause
    retention: int = 3600
    why_changed: str = ""  # empty when we agree with the seed

    def evidence(self) -> Evidence:
        return evidence(
            pod=Unavailable(UnavailableReason.NOT_FOUND, "seed model: no pod read"),
            events=events(*(evicted(uid=u) for u in sorted(self.evicted_uids))),
            node=NodeSnapshot(
                "node-a", tuple(NodeCondition(k, v) for k, v in self.node_conditions.items())
            ),
            owner=Unavailable(UnavailableReason.ERROR, "seed model: no owner read"),
        )


SHED = "shed_load_and_exit_fast"
DRAIN = "drain_gracefully"
VOLUNTARY_NEEDS_A_MARKER = (
    "The classifier makes voluntary markers explicit (tier 1 and the rollout marker) and the "
    "operational rule is 'assume eviction unless a voluntary-disruption marker is present': "
    "absence of an Evicted event and of pressure is not a marker, so we shed load."
)

SEED_CASES = [
    SeedCase(
        "Evicted event for this UID",
        frozenset({UID}),
        {},
        GRACE,
        "evicted",
        SHED,
        Cause.INVOLUNTARY_EVICTION,
    ),
    SeedCase(
        "Evicted event for this UID, past retention",
        frozenset({UID}),
        {},
        7200,
        "evicted",
        SHED,
        Cause.INVOLUNTARY_EVICTION,
    ),
    SeedCase(
        "MemoryPressure True",
        frozenset(),
        {"MemoryPressure": "True"},
        GRACE,
        "evicted",
        SHED,
        Cause.INVOLUNTARY_EVICTION,
    ),
    SeedCase(
        "DiskPressure and PIDPressure True",
        frozenset(),
        {"DiskPressure": "True", "PIDPressure": "True"},
        GRACE,
        "evicted",
        SHED,
        Cause.INVOLUNTARY_EVICTION,
    ),
    SeedCase(
        "pressure True, past retention",
        frozenset(),
        {"MemoryPressure": "True"},
        7200,
        "evicted",
        SHED,
        Cause.INVOLUNTARY_EVICTION,
    ),
    SeedCase(
        "no event, no pressure, past retention",
        frozenset(),
        {"MemoryPressure": "False"},
        7200,
        "indeterminate (raised)",
        SHED,
        Cause.INDETERMINATE,
        why_changed="same action; classify is total, so 'indeterminate' is a verdict, not an "
        "exception",
    ),
    SeedCase(
        "no event, no pressure, within retention",
        frozenset(),
        {"MemoryPressure": "False", "DiskPressure": "False"},
        GRACE,
        "voluntary",
        DRAIN,
        Cause.INDETERMINATE,
        why_changed=VOLUNTARY_NEEDS_A_MARKER,
    ),
    SeedCase(
        "only other pods' Evicted events, no pressure, within retention",
        frozenset({OTHER_UID}),
        {},
        GRACE,
        "voluntary",
        DRAIN,
        Cause.INDETERMINATE,
        why_changed=VOLUNTARY_NEEDS_A_MARKER,
    ),
    SeedCase(
        "pressure Unknown is not known to be absent, within retention",
        frozenset(),
        {"MemoryPressure": "Unknown"},
        GRACE,
        "voluntary",
        DRAIN,
        Cause.INVOLUNTARY_EVICTION,
        why_changed="a pressure condition not known to be False (the kubelet is not "
        "reporting) is a doubt, and every doubt sheds",
    ),
]


SEED_CAUSES = {"evicted": Cause.INVOLUNTARY_EVICTION, "voluntary": Cause.VOLUNTARY}


@pytest.mark.parametrize("case", SEED_CASES, ids=lambda c: c.name)
def test_seed_classify_termination_cases(case: SeedCase) -> None:
    verdict = classify(case.evidence(), NOW, case.grace, case.retention)
    assert verdict.cause is case.cause, verdict.to_json()
    if not case.why_changed:
        # We agree with the seed: same cause, same action.
        assert SEED_CAUSES[case.seed_cause] is verdict.cause
        assert verdict.action.value == case.seed_action
    else:
        # Every deliberate change is towards the seed's own safe direction.
        assert verdict.action is Action.SHED_LOAD_AND_EXIT_FAST


def test_seed_voluntary_is_reached_once_a_voluntary_marker_is_present() -> None:
    """The seed's 'no event, no pressure, within retention → voluntary' holds in our
    model as soon as the classifier's voluntary marker (the rollout) is there."""
    seed = next(c for c in SEED_CASES if c.name == "no event, no pressure, within retention")
    verdict = classify(seed.evidence()._replace(owner=MARKER), NOW, seed.grace)
    assert (verdict.cause, verdict.action) == (Cause.VOLUNTARY, Action.DRAIN_GRACEFULLY)


def test_only_the_deciding_record_notes_what_it_overrode() -> None:
    """An Evicted event, node pressure and a deletion: the event decides (the seed's first
    check), and the evidence notes that override once; pressure is recorded, not noted."""
    verdict = classify(
        evidence(pod=pod(deleted=True), events=events(evicted()), node=node("MemoryPressure")),
        NOW,
        GRACE,
    )
    assert verdict.deciding_item.fact is Fact.KUBELET_EVICTED_EVENT
    facts = [item.fact for item in verdict.evidence]
    assert facts.count(Fact.KUBELET_EVICTION_OVERRIDE) == 1
    assert Fact.NODE_PRESSURE_OVERRIDE not in facts
    assert Fact.NODE_PRESSURE in facts
