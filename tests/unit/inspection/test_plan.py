"""`plan_node`: each kind of pod a drain meets, the verdict, and the JSON against docs/cli.md."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.annotations import EVICTIONS_ANNOTATION
from graceful_drain.controller.decision.ledger import LedgerEntry, encode_ledger
from graceful_drain.controller.decision.table import DecisionConfig, Protect
from graceful_drain.inspection.plan import (
    NodeState,
    Outcome,
    Plan,
    Verdict,
    WebhookScope,
    plan_node,
)
from graceful_drain.inspection.render import plan_json, plan_table
from graceful_drain.inspection.webhook_health import WebhookHealth
from graceful_drain.kube.timefmt import format_rfc3339

from . import cluster_objects as k
from .documented_schema import problems

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
CONFIG = DecisionConfig()
NOT_SYSTEM = {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
OUTSIDE_SYSTEM = WebhookScope({"matchExpressions": [NOT_SYSTEM]})


def state(pods: list[k.Obj], *, deployments: Sequence[k.Obj] = (), budgets: Sequence[k.Obj] = (),
          elsewhere: Sequence[k.Obj] = (), webhook: WebhookScope | None = OUTSIDE_SYSTEM,
          health: WebhookHealth = k.PROTECTED,
          staying: frozenset[str] | None = None) -> NodeState:  # fmt: skip
    return NodeState(
        node=k.NODE, pods=pods, neighbours=[*pods, *elsewhere],
        replicasets=[k.replicaset(d) for d in deployments], deployments=list(deployments),
        budgets=list(budgets), namespaces={n: k.namespace(n) for n in ("default", "kube-system")},
        webhook=webhook, health=health, staying_nodes=staying,
    )  # fmt: skip


def one(plan: Plan) -> tuple[Outcome, bool, str]:
    [pod] = plan.pods
    return pod.outcome, pod.outage, pod.reason


def deployment_pod(deployment: k.Obj, name: str = "p", **options: object) -> k.Obj:
    return k.pod(name, of=k.replicaset(deployment), **options)  # type: ignore[arg-type]


def test_a_protectable_deployment_is_held_with_the_wait_its_pod_took_to_become_ready() -> None:
    web = k.deployment("web")
    pod = deployment_pod(web, created=NOW - timedelta(hours=1), ready_after=timedelta(seconds=7))
    plan = plan_node(state([pod], deployments=[web]), CONFIG, NOW)
    assert one(plan) == (Outcome.HELD, False, "rollout-requested")
    assert (plan.pods[0].expected_wait, plan.pods[0].expected_wait_source) == (
        timedelta(seconds=7), "readiness-history",
    )  # fmt: skip
    assert plan.verdict is Verdict.SAFE and plan.exit_code == 0


def test_without_readiness_history_the_probe_settings_give_the_expected_wait() -> None:
    web = k.deployment("web")
    pod = deployment_pod(web, probe={"initialDelaySeconds": 5, "periodSeconds": 3})
    plan = plan_node(state([pod], deployments=[web]), CONFIG, NOW)
    assert (plan.pods[0].expected_wait, plan.pods[0].expected_wait_source) == (
        timedelta(seconds=8), "probe-settings",
    )  # fmt: skip


def test_an_unprotectable_single_replica_is_an_outage_naming_the_field_to_change() -> None:
    cases = {
        "no-surge": (k.deployment("d", rolling={"maxSurge": 0, "maxUnavailable": 1}),
                     "spec.strategy.rollingUpdate.maxSurge: 1 (is 0)"),
        "recreate": (k.deployment("d", strategy="Recreate"),
                     "spec.strategy.type: RollingUpdate (is Recreate)"),
        "paused": (k.deployment("d", paused=True), "spec.paused: false"),
    }  # fmt: skip
    for case, (deployment, fix) in cases.items():
        plan = plan_node(state([deployment_pod(deployment)], deployments=[deployment]), CONFIG, NOW)
        assert one(plan) == (Outcome.EVICTED, True, "cannot-surge"), case
        assert fix in plan.pods[0].fix, (case, plan.pods[0].fix)
        assert plan.verdict is Verdict.OUTAGE and plan.exit_code == 1
        assert plan.outage_workloads == ["default/Deployment/d"]


def test_a_budget_allowing_no_disruption_blocks_unless_the_surge_makes_room() -> None:
    pair = k.deployment("pair", replicas=2)
    pods = [deployment_pod(pair, f"p{i}", labels={"app": "pair"}) for i in range(2)]
    strict = k.budget("pair", {"app": "pair"}, allowed=0, healthy=2, desired=2)
    # v2 (--protect=single-replica) lets a 2-replica Deployment's evictions reach the budget
    v2 = replace(CONFIG, protect=Protect.SINGLE_REPLICA)
    plan = plan_node(state(pods, deployments=[pair], budgets=[strict]), v2, NOW)
    assert [p.outcome for p in plan.pods] == [Outcome.BLOCKED, Outcome.BLOCKED]
    assert plan.pods[0].budget == "default/pair"
    assert plan.verdict is Verdict.BLOCKED and plan.exit_code == 2
    # v3 holds them (both pods on the drained node): the surge raises currentHealthy by one
    plan = plan_node(state(pods, deployments=[pair], budgets=[strict]), CONFIG, NOW)
    assert [p.outcome for p in plan.pods] == [Outcome.HELD, Outcome.HELD]

    web = k.deployment("web")  # held: its replacement raises currentHealthy by one
    pod = deployment_pod(web, labels={"app": "web"})
    minimum = k.budget("web", {"app": "web"}, allowed=0, healthy=1, desired=1)
    plan = plan_node(state([pod], deployments=[web], budgets=[minimum]), CONFIG, NOW)
    assert one(plan) == (Outcome.HELD, False, "rollout-requested")


def test_kubectl_drains_treatment_of_daemonset_mirror_and_bare_pods() -> None:
    agent = k.pod("agent-x", of=k.daemonset("agent"))
    mirror = k.pod("etcd-node-a", annotations={"kubernetes.io/config.mirror": "abc"})
    bare = k.pod("scratch", volumes=[{"name": "tmp", "emptyDir": {}}])
    plan = plan_node(state([agent, mirror, bare]), CONFIG, NOW)
    by_name = {p.name: p for p in plan.pods}
    assert (by_name["agent-x"].outcome, by_name["agent-x"].outage) == (Outcome.IGNORED, False)
    assert by_name["etcd-node-a"].outcome is Outcome.SKIPPED
    assert (by_name["scratch"].outcome, by_name["scratch"].outage) == (Outcome.EVICTED, True)
    assert by_name["scratch"].reason == "no-deployment"
    assert plan.kubectl_flags == ("--ignore-daemonsets", "--delete-emptydir-data", "--force")


def test_a_replica_ready_elsewhere_means_no_outage() -> None:
    pair = k.deployment("pair", replicas=2)
    here, there = deployment_pod(pair, "here"), deployment_pod(pair, "there", node="node-b")
    plan = plan_node(state([here], deployments=[pair], elsewhere=[there]), CONFIG, NOW)
    assert one(plan) == (Outcome.EVICTED, False, "ready-elsewhere")
    cordoned = state([here], deployments=[pair], elsewhere=[there], staying=frozenset())
    assert one(plan_node(cordoned, CONFIG, NOW)) == (Outcome.HELD, False, "rollout-requested")


def test_pods_the_webhook_is_not_asked_about_are_not_reviewed() -> None:
    web = k.deployment("web", namespace="kube-system")
    pod = k.pod("p", of=k.replicaset(web), namespace="kube-system")
    plan = plan_node(state([pod], deployments=[web]), CONFIG, NOW)
    assert one(plan) == (Outcome.EVICTED, True, "not-reviewed")
    assert plan.pods[0].decision is None

    web = k.deployment("web")
    plan = plan_node(state([deployment_pod(web)], deployments=[web], webhook=None,
                           health=k.ABSENT), CONFIG, NOW)  # fmt: skip
    assert one(plan) == (Outcome.EVICTED, True, "not-reviewed")
    assert not plan.webhook_registered
    assert plan.verdict is Verdict.UNPROTECTED and plan.exit_code == 4


def test_the_json_and_the_table_of_a_plan() -> None:
    web, solo = k.deployment("web"), k.deployment("solo", rolling={"maxSurge": 0})
    pods = [deployment_pod(web, "w"), deployment_pod(solo, "s"), k.pod("bare")]
    plan = plan_node(state(pods, deployments=[web, solo]), CONFIG, NOW)
    document = json.loads(plan_json(plan, "defaults"))
    assert problems(document, "plan") == []
    assert document["verdict"] == "outage" and document["exitCode"] == 1

    table = plan_table(plan, "defaults", colour=False)
    assert table.splitlines()[-1] == (
        "Verdict: 2 outage(s): default/Pod/bare, default/Deployment/solo"
    )
    assert "\033[" not in table
    assert "\033[31m" in plan_table(plan, "defaults", colour=True)


def test_a_webhook_that_does_not_answer_makes_the_verdict_unprotected_whatever_else() -> None:
    """failurePolicy Ignore: what the webhook would hold is evicted unchecked."""
    web, pair = k.deployment("web"), k.deployment("pair", replicas=2)
    here, there = deployment_pod(pair, "here"), deployment_pod(pair, "there", node="node-b")
    pods = [deployment_pod(web, "w"), here]
    protected = plan_node(state(pods, deployments=[web, pair], elsewhere=[there]), CONFIG, NOW)
    assert protected.verdict is Verdict.SAFE
    for health in (k.DOWN, k.ABSENT):
        down = plan_node(state(pods, deployments=[web, pair], elsewhere=[there], health=health,
                               webhook=None if health is k.ABSENT else OUTSIDE_SYSTEM),
                         CONFIG, NOW)  # fmt: skip
        assert down.verdict is Verdict.UNPROTECTED and down.exit_code == 4
        by_name = {p.name: p for p in down.pods}
        assert (by_name["w"].outcome, by_name["w"].outage) == (Outcome.EVICTED, True)
        assert (by_name["here"].outcome, by_name["here"].outage) == (Outcome.EVICTED, False)
        assert down.outage_workloads == ["default/Deployment/web"]
    down = plan_node(state(pods, deployments=[web, pair], elsewhere=[there], health=k.DOWN),
                     CONFIG, NOW)  # fmt: skip
    assert {p.reason for p in down.pods} == {"webhook-unprotected"}
    assert all(p.decision is None for p in down.pods)
    assert "could not connect to 127.0.0.1:9" in down.pods[0].message
    table = plan_table(down, "defaults", colour=False)
    assert "webhook UNPROTECTED" in table.splitlines()[0]
    assert table.splitlines()[-1] == (
        "Verdict: unprotected: webhook graceful-drain does not protect evictions (could not "
        "connect to 127.0.0.1:9); failurePolicy Ignore: the API server lets every eviction "
        "through unchecked, the last Ready pod included; 1 outage(s): default/Deployment/web"
    )
    document = json.loads(plan_json(down, "defaults"))
    assert problems(document, "plan") == []
    assert (document["verdict"], document["exitCode"]) == ("unprotected", 4)
    assert document["webhook"]["protection"] == "unprotected"


def test_with_failure_policy_fail_a_down_webhook_refuses_what_it_reviews() -> None:
    web = k.deployment("web")
    system = k.pod("s", of=k.replicaset(k.deployment("dns", namespace="kube-system")),
                   namespace="kube-system")  # fmt: skip
    refusing = replace(k.DOWN, failure_policy="Fail")
    plan = plan_node(state([deployment_pod(web, "w"), system], deployments=[web],
                           health=refusing), CONFIG, NOW)  # fmt: skip
    by_name = {p.name: p for p in plan.pods}
    assert (by_name["w"].outcome, by_name["w"].reason) == (Outcome.BLOCKED, "webhook-unprotected")
    assert "refuses every eviction" in by_name["w"].message
    assert by_name["s"].reason == "not-reviewed"  # never sent to the webhook
    assert plan.verdict is Verdict.UNPROTECTED


def test_an_unverified_webhook_keeps_the_prediction_and_says_it_was_not_verified() -> None:
    web = k.deployment("web")
    plan = plan_node(state([deployment_pod(web)], deployments=[web], health=k.UNVERIFIED),
                     CONFIG, NOW)  # fmt: skip
    assert one(plan) == (Outcome.HELD, False, "rollout-requested")
    assert plan.verdict is Verdict.SAFE
    table = plan_table(plan, "defaults", colour=False).splitlines()
    assert "webhook not verified" in table[0]
    assert table[1].startswith("Webhook not verified: graceful-drain: reachable from inside")


unprotected_healths = st.sampled_from([
    k.DOWN, k.ABSENT, replace(k.DOWN, failure_policy="Fail"),
    replace(k.PROTECTED, answer="no-answer"), replace(k.PROTECTED, certificate="failed"),
    replace(k.UNVERIFIED, problem="Service graceful-drain/graceful-drain-webhook not found"),
])  # fmt: skip
layouts = st.lists(
    st.tuples(st.integers(1, 3), st.booleans(), st.booleans(), st.sampled_from(["default",
              "kube-system"])),  # replicas, ready, another Ready pod elsewhere, namespace
    min_size=1, max_size=5,
)  # fmt: skip


@given(layouts, unprotected_healths)
def test_an_unprotected_webhook_never_predicts_a_hold_and_always_says_unprotected(
    layout: list[tuple[int, bool, bool, str]], health: WebhookHealth
) -> None:
    deployments, pods, elsewhere = [], [], []
    for i, (replicas, ready, spare, namespace) in enumerate(layout):
        deployment = k.deployment(f"d{i}", replicas=replicas, namespace=namespace)
        deployments.append(deployment)
        pods.append(k.pod(f"d{i}-here", of=k.replicaset(deployment), ready=ready,
                          namespace=namespace))  # fmt: skip
        if spare:
            elsewhere.append(k.pod(f"d{i}-there", of=k.replicaset(deployment), node="node-b",
                                   namespace=namespace))  # fmt: skip
    webhook = None if not health.registered else OUTSIDE_SYSTEM
    plan = plan_node(state(pods, deployments=deployments, elsewhere=elsewhere, webhook=webhook,
                           health=health), CONFIG, NOW)  # fmt: skip
    assert plan.verdict is Verdict.UNPROTECTED and plan.exit_code == 4
    assert all(pod.outcome is not Outcome.HELD for pod in plan.pods)
    for pod, (_, ready, spare, _) in zip(plan.pods, sorted(layout_by_name(layout)), strict=True):
        if pod.reason == "webhook-unprotected" and health.failure_policy == "Ignore":
            assert pod.outage == (ready and not spare), pod
        if pod.reason == "webhook-unprotected" and health.failure_policy == "Fail":
            assert pod.outcome is Outcome.BLOCKED


def layout_by_name(
    layout: list[tuple[int, bool, bool, str]],
) -> list[tuple[tuple[str, str], bool, bool, str]]:
    """The layout keyed as plan sorts its pods: by (namespace, name)."""
    return [((ns, f"d{i}-here"), ready, spare, ns)
            for i, (_, ready, spare, ns) in enumerate(layout)]  # fmt: skip


def test_a_held_pod_on_a_node_with_a_karpenter_deadline_names_it() -> None:
    """decision/deadline.py: ahead, the drain *may* cause an outage; passed, it *will*."""
    web = k.deployment("web")
    pod = deployment_pod(web)
    pod["spec"]["terminationGracePeriodSeconds"] = 5
    ahead = plan_node(replace(state([pod], deployments=[web]),
                              node_deadline=NOW + timedelta(seconds=20)), CONFIG, NOW)  # fmt: skip
    assert one(ahead) == (Outcome.HELD, False, "rollout-requested")
    [held] = ahead.pods
    assert held.deadline is not None and held.deadline.delete_at == NOW + timedelta(seconds=15)
    assert "Karpenter deletes this pod at 2026-05-01T12:00:15Z (in 15s;" in held.message
    assert held.decision is not None and held.decision.message == held.message
    document = json.loads(plan_json(ahead, "defaults"))
    assert problems(document, "plan") == []
    assert document["pods"][0]["terminationDeadline"]["deleteAt"] == "2026-05-01T12:00:15Z"
    assert document["pods"][0]["terminationDeadline"]["outage"] == "may"
    assert "Karpenter deletes this pod" in plan_table(ahead, "defaults", colour=False)
    assert ahead.verdict is Verdict.SAFE

    passed = plan_node(replace(state([pod], deployments=[web]),
                               node_deadline=NOW + timedelta(seconds=3)), CONFIG, NOW)  # fmt: skip
    assert one(passed) == (Outcome.HELD, True, "rollout-requested")
    assert "will have no Ready pod" in passed.pods[0].message
    assert passed.verdict is Verdict.OUTAGE

    without = plan_node(state([pod], deployments=[web]), CONFIG, NOW)
    assert without.pods[0].deadline is None and "Karpenter" not in without.pods[0].message
    assert json.loads(plan_json(without, "defaults"))["pods"][0]["terminationDeadline"] is None


def test_a_pod_the_ledger_counts_as_gone_is_not_ready_elsewhere() -> None:
    """The other pod was let go by the webhook (recorded in the Deployment's evictions ledger)
    but its deletion has not been seen yet: plan counts it as gone, as the webhook does."""
    pair = k.deployment("pair", replicas=2)
    ledger = encode_ledger([LedgerEntry("there", "uid-there", NOW - timedelta(seconds=3))])
    pair["metadata"].setdefault("annotations", {})[EVICTIONS_ANNOTATION] = ledger
    here, there = deployment_pod(pair, "here"), deployment_pod(pair, "there", node="node-b")
    plan = plan_node(state([here], deployments=[pair], elsewhere=[there]), CONFIG, NOW)
    assert one(plan) == (Outcome.HELD, False, "rollout-requested")
    later = NOW + timedelta(minutes=2)  # the entry expired: the pod was never deleted
    assert (
        one(plan_node(state([here], deployments=[pair], elsewhere=[there]), CONFIG, later))[2]
        == "ready-elsewhere"
    )


def test_a_held_pod_whose_deployment_cannot_be_written_says_why() -> None:
    web = k.deployment("web")
    pod = deployment_pod(web)
    deferred = {
        "involvedObject": {"namespace": "default", "name": "web"},
        "reason": "GracefulDrainWriteDeferred",
        "lastTimestamp": format_rfc3339(NOW - timedelta(seconds=20)),
        "message": "graceful-drain: the rollout request (restarted-at) on Deployment default/web "
        "failed for now (HTTP 503: unavailable); the eviction is held and the controller will "
        "retry, for at most 9m40s more",
    }
    stale = {**deferred, "lastTimestamp": format_rfc3339(NOW - timedelta(hours=1))}
    plan = plan_node(replace(state([pod], deployments=[web]), write_events=[deferred]), CONFIG,
                     NOW)  # fmt: skip
    [held] = plan.pods
    assert held.outcome is Outcome.HELD
    assert "held meanwhile because the rollout request (restarted-at) on Deployment" in held.message
    assert "failed for now (HTTP 503: unavailable)" in held.message
    assert "(GracefulDrainWriteDeferred, 2026-05-01T11:59:40Z)" in held.message
    old = plan_node(replace(state([pod], deployments=[web]), write_events=[stale]), CONFIG, NOW)
    assert "held meanwhile" not in old.pods[0].message
