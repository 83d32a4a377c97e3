"""Decision table v3 (`--protect=last-ready`, the default; docs/decisions.md), by reason name,
and its invariant as a property: no sequence of evictions `decide` allows leaves a protected
Deployment with no Ready pod while a node that is not being drained could hold one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graceful_drain.controller.decision.lookups import (
    DeploymentFound,
    NoDeployment,
    OwnerUnresolved,
    PodGone,
    PodOutOfScope,
    PodUnavailable,
    ready_elsewhere_among,
)
from graceful_drain.controller.decision.model import DeploymentInfo, PodInfo
from graceful_drain.controller.decision.reasons import DENYING_REASONS, Decision, Reason
from graceful_drain.controller.decision.stamp import WriteFailure
from graceful_drain.controller.decision.table import (
    DecisionConfig,
    Protect,
    after_write_failure,
    decide,
    malformed_review,
    reread_failed,
    unexpected_error,
)

from .objects import DEPLOYMENT, ENABLED, NOW, POD, REQUEST
from .test_decide_table import Scenario


def pod(name: str, node: str, *, ready: bool = True, terminating: bool = False) -> PodInfo:
    return replace(POD, name=name, uid=f"uid-{name}", node_name=node, ready=ready,
                   terminating=terminating)  # fmt: skip


@dataclass(frozen=True)
class Layout:
    """The evicted pod (POD, on node-a) and the Deployment's other pods, with the nodes being
    drained: what `ready_elsewhere` reads."""

    others: tuple[PodInfo, ...] = ()
    drained: frozenset[str] = frozenset({"node-a"})

    def ready_elsewhere(self, evicted: PodInfo, _: DeploymentInfo) -> int:
        return ready_elsewhere_among(evicted, self.others, self.drained.__contains__)

    def ready_besides(self, evicted: PodInfo, _: DeploymentInfo) -> int:
        return sum(1 for other in self.others if other.ready and not other.terminating
                   and other.name != evicted.name)  # fmt: skip


def v3(scenario: Scenario, layout: Layout = Layout()) -> Decision:
    return decide(scenario.request, scenario.pod, scenario.owner, scenario.config, scenario.now,
                  ready_besides=layout.ready_besides,
                  ready_elsewhere=layout.ready_elsewhere)  # fmt: skip


BASE = Scenario(config=DecisionConfig())  # last-ready
STAYS = Layout(others=(pod("web-2", "node-b"),))
ALL_ON_A = Layout(others=(pod("web-2", "node-a"), pod("web-3", "node-a")))
BOTH_DRAINED = Layout(others=(pod("web-2", "node-b"),), drained=frozenset({"node-a", "node-b"}))

Case = Callable[[], Decision]


def write_failed(held: Decision, failure: WriteFailure, failing_for: timedelta | None = None
                 ) -> Decision:  # fmt: skip
    answer = after_write_failure(held, failure, status=503, attempt=1, failing_for=failing_for)
    assert isinstance(answer, Decision)
    return answer


# Every reason the table gives, in last-ready mode unless said otherwise; several situations
# for the rows v3 changed.
TABLE: dict[str, tuple[Reason, Case]] = {
    "dry run": (Reason.DRY_RUN, lambda: v3(BASE.with_request(dry_run=True))),
    "not an eviction": (Reason.NOT_EVICTION, lambda: v3(BASE.with_request(operation="DELETE"))),
    "invalid name": (Reason.INVALID_NAME, lambda: v3(BASE.with_request(name="a/b"))),
    "pod gone": (Reason.POD_GONE, lambda: v3(replace(BASE, pod=PodGone()))),
    "out of scope": (
        Reason.NAMESPACE_OUT_OF_SCOPE,
        lambda: v3(replace(BASE.configured(namespaces=frozenset({"x"})), pod=PodOutOfScope())),
    ),
    "pod unreadable": (Reason.CACHE_COLD, lambda: v3(replace(BASE, pod=PodUnavailable("x")))),
    "cold cache, owner unreadable": (
        Reason.CACHE_COLD,
        lambda: v3(replace(BASE, owner=OwnerUnresolved("timed out", cold=True))),
    ),
    "terminating": (Reason.POD_TERMINATING, lambda: v3(BASE.with_pod(terminating=True))),
    "uid mismatch": (Reason.UID_MISMATCH, lambda: v3(BASE.with_request(precondition_uid="x"))),
    "StatefulSet": (Reason.NO_DEPLOYMENT, lambda: v3(replace(BASE, owner=NoDeployment("sts")))),
    "synced cache, owner missing": (
        Reason.OWNER_UNRESOLVED,
        lambda: v3(replace(BASE, owner=OwnerUnresolved("not found"))),
    ),
    "deleting": (Reason.DEPLOYMENT_DELETING, lambda: v3(BASE.with_deployment(deleting=True))),
    "opted out": (Reason.OPTED_OUT, lambda: v3(BASE.with_deployment(enabled_value="false"))),
    "invalid annotation": (
        Reason.ENABLED_ANNOTATION_INVALID,
        lambda: v3(BASE.with_deployment(enabled_value="no")),
    ),
    "opt-in, absent": (Reason.NOT_ENABLED, lambda: v3(BASE.configured(enabled_annotation=ENABLED))),
    "single-replica mode, 3 replicas": (
        Reason.REPLICAS_NOT_ONE,
        lambda: v3(
            BASE.configured(protect=Protect.SINGLE_REPLICA).with_deployment(replicas=3), ALL_ON_A
        ),
    ),
    "another Ready pod on a node that stays": (
        Reason.READY_ELSEWHERE,
        lambda: v3(BASE.with_deployment(replicas=3), STAYS),
    ),
    "another Ready pod on a node that stays, 1 replica (status lags)": (
        Reason.READY_ELSEWHERE,
        lambda: v3(BASE, STAYS),
    ),
    "Recreate, nothing elsewhere": (
        Reason.CANNOT_SURGE,
        lambda: v3(
            BASE.with_deployment(replicas=3, strategy_type="Recreate", max_surge=0), ALL_ON_A
        ),
    ),
    "Recreate, a pod elsewhere: no warning, no rollout needed": (
        Reason.READY_ELSEWHERE,
        lambda: v3(BASE.with_deployment(strategy_type="Recreate", max_surge=0), STAYS),
    ),
    "replicas - maxUnavailable < 1": (
        Reason.CANNOT_PROTECT,
        lambda: v3(BASE.with_deployment(replicas=2, max_unavailable=2), ALL_ON_A),
    ),
    "not Ready": (Reason.POD_NOT_READY, lambda: v3(BASE.with_pod(ready=False), ALL_ON_A)),
    "our replacement is Ready on a node that stays": (
        Reason.SURGE_READY,
        lambda: v3(BASE.restarted(timedelta(seconds=20), copied=True), STAYS),
    ),
    "timed out": (
        Reason.ROLLOUT_TIMEOUT,
        lambda: v3(BASE.restarted(timedelta(minutes=11)), ALL_ON_A),
    ),
    "our rollout, the HPA scaled to 2 meanwhile": (
        Reason.ROLLOUT_IN_PROGRESS,
        lambda: v3(
            BASE.restarted(timedelta(seconds=9), copied=True).with_deployment(
                replicas=2, ready_replicas=2
            ),
            Layout(others=(pod("web-2", "node-b", ready=False),)),
        ),
    ),
    "our rollout, scaled to 2, single-replica mode": (
        Reason.ROLLOUT_IN_PROGRESS,
        lambda: v3(
            BASE.configured(protect=Protect.SINGLE_REPLICA)
            .restarted(timedelta(seconds=9), copied=True)
            .with_deployment(replicas=2),
            Layout(others=(pod("web-2", "node-b", ready=False),)),
        ),
    ),
    "3 replicas all on the drained node": (
        Reason.ROLLOUT_REQUESTED,
        lambda: v3(BASE.with_deployment(replicas=3), ALL_ON_A),
    ),
    "3 replicas, maxUnavailable 1 (2 stay Ready through the rollout)": (
        Reason.ROLLOUT_REQUESTED,
        lambda: v3(BASE.with_deployment(replicas=3, max_unavailable=1), ALL_ON_A),
    ),
    "2 replicas, the other one on a node also being drained": (
        Reason.ROLLOUT_REQUESTED,
        lambda: v3(BASE.with_deployment(replicas=2), BOTH_DRAINED),
    ),
    "another Ready pod, but terminating": (
        Reason.ROLLOUT_REQUESTED,
        lambda: v3(BASE, Layout(others=(pod("web-2", "node-b", terminating=True),))),
    ),
    "another pod on a node that stays, not Ready": (
        Reason.ROLLOUT_REQUESTED,
        lambda: v3(BASE, Layout(others=(pod("web-2", "node-b", ready=False),))),
    ),
    "stamp conflict, re-read failed": (
        Reason.REREAD_FAILED,
        lambda: reread_failed(v3(BASE), "timed out"),
    ),
    "stamp refused": (
        Reason.STAMP_FAILED,
        lambda: write_failed(v3(BASE), WriteFailure.DEFINITE),
    ),
    "stamp failed for now": (
        Reason.WRITE_DEFERRED,
        lambda: write_failed(v3(BASE), WriteFailure.TRANSIENT, timedelta(seconds=5)),
    ),
    "stamp not sent, too little of the budget left": (
        Reason.BUDGET_SPENT,
        lambda: write_failed(v3(BASE), WriteFailure.UNSENT, timedelta(seconds=5)),
    ),
    "stamp failed for now, for the rollout timeout": (
        Reason.WRITE_TIMEOUT,
        lambda: write_failed(v3(BASE), WriteFailure.TRANSIENT, timedelta(minutes=10)),
    ),
    "record refused": (
        Reason.RECORD_FAILED,
        lambda: write_failed(v3(BASE, STAYS), WriteFailure.DEFINITE),
    ),
    "bug": (Reason.ERROR, lambda: unexpected_error(REQUEST, "boom")),
    "malformed review": (Reason.MALFORMED_REVIEW, lambda: malformed_review("not JSON")),
}


@pytest.mark.parametrize("situation", list(TABLE))
def test_v3_table(situation: str) -> None:
    expected, case = TABLE[situation]
    decision = case()
    assert decision.reason is expected
    assert decision.allowed is (expected not in DENYING_REASONS)
    assert decision.message.startswith("graceful-drain: ")
    assert (decision.stamp is not None) is (expected is Reason.ROLLOUT_REQUESTED)


def test_the_v3_table_covers_every_reason() -> None:
    assert {reason for reason, _ in TABLE.values()} == set(Reason)


def test_without_the_nodes_nothing_counts_as_elsewhere_and_the_eviction_is_held() -> None:
    decision = decide(BASE.request, BASE.pod, BASE.owner, BASE.config, BASE.now,
                      ready_besides=STAYS.ready_besides)  # fmt: skip
    assert decision.reason is Reason.ROLLOUT_REQUESTED


def test_single_replica_mode_allows_what_v2_allowed_and_last_ready_holds_it() -> None:
    """The 3-replica case of issue 26: every pod on the drained node, `status.readyReplicas`
    3. v2 let the first eviction through (a PDB's business); v3 holds it."""
    three = BASE.with_deployment(replicas=3, ready_replicas=3)
    single = three.configured(protect=Protect.SINGLE_REPLICA)
    assert v3(single, ALL_ON_A).reason is Reason.REPLICAS_NOT_ONE
    assert v3(three, ALL_ON_A).reason is Reason.ROLLOUT_REQUESTED


# --- the invariant, over generated layouts and eviction sequences ----------------------------

NODES = ("node-a", "node-b", "node-c", "node-d")


@dataclass
class World:
    pods: list[PodInfo]
    drained: frozenset[str]
    deployment: DeploymentInfo

    def ready(self) -> list[PodInfo]:
        return [p for p in self.pods if p.ready and not p.terminating]

    def layout(self) -> Layout:
        return Layout(others=tuple(self.pods), drained=self.drained)


Step = tuple[str, int, int]  # (action, pod index or node index, extra)


@settings(max_examples=300, deadline=None)
@given(
    placement=st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=6),
    drained=st.sets(st.integers(0, 3), min_size=1, max_size=3),
    replicas=st.integers(1, 6),
    max_unavailable=st.integers(0, 1),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["evict", "replacement", "scale", "unready"]),
            st.integers(0, 7),
            st.integers(0, 3),
        ),
        max_size=25,
    ),
)
def test_no_allowed_eviction_takes_the_last_ready_pod_while_another_node_could_hold_one(
    placement: list[tuple[int, bool]], drained: set[int], replicas: int,
    max_unavailable: int, steps: list[Step],
) -> None:  # fmt: skip
    """Pods of one protected Deployment (RollingUpdate, maxSurge 1, replicas - maxUnavailable
    >= 1) on up to four nodes, at least one being drained and at least one staying. Any
    sequence of: evictions of any pod (by a drain, a descheduler), a replacement becoming
    Ready on some node (our rollout, or the HPA), a change of spec.replicas, a pod turning
    unready. Whenever `decide` allows an eviction of a Ready pod, another Ready pod stays on a
    node that is not being drained."""
    drained_nodes = frozenset(NODES[i] for i in drained)
    assert len(drained_nodes) < len(NODES)  # a node stays
    world = World(
        pods=[pod(f"web-{i}", NODES[node], ready=ready) for i, (node, ready) in
              enumerate(placement)],
        drained=drained_nodes,
        deployment=replace(DEPLOYMENT, replicas=max(replicas, max_unavailable + 1),
                           max_unavailable=max_unavailable),
    )  # fmt: skip
    now = NOW
    for action, index, extra in steps:
        now += timedelta(seconds=5)  # well within the 10m rolloutTimeout
        if action == "replacement":
            name = f"web-new-{len(world.pods)}"
            world.pods.append(pod(name, NODES[extra], ready=True))
            continue
        if action == "scale":
            world.deployment = replace(world.deployment,
                                       replicas=max(extra + 1, max_unavailable + 1))  # fmt: skip
            continue
        live = [p for p in world.pods if not p.terminating]
        if not live:
            continue
        target = live[index % len(live)]
        if action == "unready":
            world.pods[world.pods.index(target)] = replace(target, ready=False)
            continue
        scenario = replace(BASE, now=now, owner=DeploymentFound(world.deployment))
        scenario = replace(scenario, request=msgspec.structs.replace(REQUEST, name=target.name))
        scenario = scenario.with_pod(**{f: getattr(target, f) for f in (
            "name", "uid", "node_name", "ready", "terminating")})  # fmt: skip
        decision = v3(scenario, world.layout())
        if decision.stamp is not None:  # the webhook stamps: our rollout is under way
            world.deployment = replace(
                world.deployment, restarted_at=now, restarted_at_raw=decision.stamp.value,
                template_restarted_at=decision.stamp.value,
            )  # fmt: skip
        if not decision.allowed:
            continue
        assert decision.reason is not Reason.ROLLOUT_TIMEOUT
        was_ready = target.ready
        world.pods[world.pods.index(target)] = replace(target, terminating=True)
        if was_ready:
            staying = [p for p in world.ready() if p.node_name not in world.drained]
            assert staying, (decision.reason, world)
