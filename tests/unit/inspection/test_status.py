"""`build_status`: held Deployments with the webhook's own answer, timeouts, webhook, leader."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from graceful_drain.annotations import (
    COMPLETED_AT_ANNOTATION,
    EVICTIONS_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
)
from graceful_drain.controller.decision.ledger import LedgerEntry, encode_ledger
from graceful_drain.controller.decision.model import TEMPLATE_RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.table import DecisionConfig
from graceful_drain.inspection.render import status_json, status_table
from graceful_drain.inspection.status import LeaderState, Replacement, StatusState, build_status
from graceful_drain.inspection.webhook_health import WebhookHealth
from graceful_drain.kube.timefmt import format_rfc3339

from . import cluster_objects as k
from .documented_schema import problems

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
CONFIG = DecisionConfig(rollout_timeout=timedelta(minutes=5))
HEALTHY, MISSING = k.PROTECTED, k.ABSENT
LEASE = {"spec": {"holderIdentity": "graceful-drain-0", "leaseDurationSeconds": 15,
                  "renewTime": format_rfc3339(NOW - timedelta(seconds=3))}}  # fmt: skip


def held_state(webhook: WebhookHealth = HEALTHY, lease: k.Obj | None = LEASE) -> StatusState:
    stamp = {RESTARTED_AT_ANNOTATION: format_rfc3339(NOW - timedelta(seconds=75))}
    web = k.deployment("web", annotations=stamp)
    idle = k.deployment("idle")
    timeout = {"involvedObject": {"namespace": "default", "name": "old"}, "count": 2,
               "lastTimestamp": format_rfc3339(NOW - timedelta(minutes=9)),
               "message": "did not complete"}  # fmt: skip
    return StatusState(
        deployments=[web, idle], replicasets=[k.replicaset(web), k.replicaset(idle)],
        pods=[k.pod("web-1", of=k.replicaset(web)), k.pod("idle-1", of=k.replicaset(idle))],
        cordoned=frozenset({k.NODE}), timeout_events=[timeout], webhook=webhook,
        leader=LeaderState.of(lease, "graceful-drain/graceful-drain"), leader_elect=True,
    )  # fmt: skip


def test_a_held_deployment_shows_its_stamp_age_time_left_node_and_the_webhooks_message() -> None:
    status = build_status(held_state(), CONFIG, NOW)
    [held] = status.held
    assert (held.name, held.waited, held.time_left) == (
        "web", timedelta(seconds=75), timedelta(minutes=3, seconds=45),
    )  # fmt: skip
    assert held.nodes == (k.NODE,) and held.pod == "web-1"
    assert held.decision is not None and held.decision.reason.value == "rollout-in-progress"
    assert "(rollout requested 1m15s ago, gives up after 5m0s)" in held.decision.message
    assert status.leader_present and status.exit_code == 0
    [timeout] = status.timeouts
    assert (timeout.deployment, timeout.count) == ("old", 2)


def test_past_the_timeout_the_escape_hatch_is_open() -> None:
    status = build_status(held_state(), CONFIG, NOW + timedelta(minutes=10))
    [held] = status.held
    assert held.time_left == timedelta(0)
    assert held.decision is not None and held.decision.reason.value == "rollout-timeout"


def test_a_missing_webhook_or_an_expired_lease_is_degraded() -> None:
    assert build_status(held_state(webhook=MISSING), CONFIG, NOW).exit_code == 1
    assert build_status(held_state(), CONFIG, NOW + timedelta(minutes=1)).exit_code == 1
    assert build_status(held_state(lease=None), CONFIG, NOW).exit_code == 1


def test_the_json_and_the_table_of_a_status() -> None:
    status = build_status(held_state(), CONFIG, NOW)
    document = json.loads(status_json(status, "defaults"))
    assert problems(document, "status") == []
    assert document["held"][0]["waited"] == "1m15s"
    assert document["held"][0]["timeLeft"] == "3m45s"
    empty = build_status(
        StatusState([], [], [], frozenset(), [], MISSING, LeaderState.of(None, "ns/l"), False),
        CONFIG, NOW,
    )  # fmt: skip
    assert problems(json.loads(status_json(empty, "defaults")), "status") == []

    table = status_table(status, "defaults", colour=False)
    [row] = [line for line in table.splitlines() if line.startswith("default/web ")]
    assert row.split()[1:6] == ["1m15s", "3m45s", "not", "made", "yet"]  # no rollout yet
    assert table.splitlines()[0].startswith("Webhook: ok: graceful-drain: answers")


def test_status_leads_with_an_unprotected_webhook_and_is_never_ok_without_a_check() -> None:
    for health in (k.DOWN, k.ABSENT, WebhookHealth("graceful-drain", True, "valid", "verified",
                                                   "127.0.0.1:8443", k.SERVICE, "no answer",
                                                   "no-answer", "Ignore")):  # fmt: skip
        status = build_status(held_state(webhook=health), CONFIG, NOW)
        assert status.exit_code == 1
        first = status_table(status, "defaults", colour=False).splitlines()[0]
        assert first.startswith("Webhook: UNPROTECTED: "), first
        assert "through unchecked" in first and health.detail in first
        [row] = [line for line in status_table(status, "defaults", colour=False).splitlines()
                 if line.startswith("default/web ")]  # fmt: skip
        assert row.endswith("nothing: it does not answer")  # not the 429 nobody gets
        document = json.loads(status_json(status, "defaults"))
        assert problems(document, "status") == []
        assert (document["webhook"]["protection"], document["webhook"]["healthy"]) == (
            "unprotected", False,
        )  # fmt: skip
    status = build_status(held_state(webhook=k.UNVERIFIED), CONFIG, NOW)
    first = status_table(status, "defaults", colour=False).splitlines()[0]
    assert first.startswith("Webhook: not verified: ") and " ok" not in first
    assert status.exit_code == 0  # nothing found wrong; the line says what was not checked


STAMP = format_rfc3339(NOW - timedelta(seconds=75))


def rolled_out(name: str, annotations: dict[str, str], **status: int) -> k.Obj:
    """A Deployment whose template carries the stamp: its rollout was started."""
    deployment = k.deployment(name, annotations=annotations)
    deployment["spec"]["template"] = {
        "metadata": {"annotations": {TEMPLATE_RESTARTED_AT_ANNOTATION: STAMP}},
        "spec": {"terminationGracePeriodSeconds": 30},
    }  # fmt: skip
    deployment["status"].update(status)
    return deployment


def new_replicaset(deployment: k.Obj) -> k.Obj:
    replicaset = k.replicaset(deployment)
    replicaset["metadata"]["name"] += "-new"
    replicaset["metadata"]["uid"] += "-new"
    return replicaset


def test_a_held_deployments_pending_replacement_and_why_the_old_pod_is_not_counted() -> None:
    web = rolled_out("web", {RESTARTED_AT_ANNOTATION: STAMP}, replicas=2, updatedReplicas=1,
                     readyReplicas=1, availableReplicas=1)  # fmt: skip
    old = k.pod("web-old", of=k.replicaset(web))  # Ready, on the cordoned node
    pending = k.pod("web-new", of=new_replicaset(web), ready=False,
                    annotations={TEMPLATE_RESTARTED_AT_ANNOTATION: STAMP})  # fmt: skip
    del pending["spec"]["nodeName"]
    pending["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 node(s) were unschedulable."}]}  # fmt: skip
    state = replace(held_state(), deployments=[web],
                    replicasets=[k.replicaset(web), new_replicaset(web)],
                    pods=[old, pending])  # fmt: skip
    status = build_status(state, CONFIG, NOW)
    [held] = status.held
    assert held.pod == "web-old" and held.ready == 1  # the Deployment's own count
    [replacement] = held.replacements
    assert replacement == Replacement(
        "web-new",
        "Pending",
        None,
        False,
        "Unschedulable",
        "0/3 nodes are available: 3 node(s) were unschedulable.",
    )
    assert held.replacements_ready == 0

    table = status_table(status, "defaults", colour=False).splitlines()
    [row] = [line for line in table if line.startswith("default/web ")]
    assert row.split()[3:5] == ["0/1", "ready"]
    assert (
        "  default/web replacement web-new: Pending, not scheduled, not Ready (Unschedulable: "
        "0/3 nodes are available: 3 node(s) were unschedulable.)"
    ) in table
    document = json.loads(status_json(status, "defaults"))
    assert problems(document, "status") == []
    [held_json] = document["held"]
    assert held_json["replacementsReady"] == 0
    assert held_json["replacements"] == [{
        "name": "web-new", "phase": "Pending", "node": None, "ready": False,
        "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 node(s) were unschedulable."}]  # fmt: skip

    running = replace(
        state,
        pods=[
            old,
            k.pod(
                "web-new",
                of=new_replicaset(web),
                node="node-b",
                annotations={TEMPLATE_RESTARTED_AT_ANNOTATION: STAMP},
            ),
        ],
    )
    [held] = build_status(running, CONFIG, NOW).held
    assert [(r.node, r.ready, r.reason) for r in held.replacements] == [("node-b", True, None)]
    assert held.replacements_ready == 1


def test_finished_drains_are_listed_apart_with_how_long_their_stamp_is_kept() -> None:
    done_at = NOW - timedelta(seconds=10)
    done = rolled_out("api", {RESTARTED_AT_ANNOTATION: STAMP,
                              COMPLETED_AT_ANNOTATION: format_rfc3339(done_at)})  # fmt: skip
    complete = rolled_out("cart", {RESTARTED_AT_ANNOTATION: STAMP})  # not written yet
    state = replace(held_state(), deployments=[done, complete],
                    replicasets=[k.replicaset(done), k.replicaset(complete)], pods=[])  # fmt: skip
    status = build_status(state, CONFIG, NOW)
    assert status.held == ()
    assert [(c.name, c.completed_at, c.kept_until) for c in status.completed] == [
        ("api", format_rfc3339(done_at), done_at + timedelta(seconds=30)),
        ("cart", None, NOW + timedelta(seconds=30)),
    ]
    table = status_table(status, "defaults", colour=False).splitlines()
    assert "No Deployment is held." in table
    at = table.index("Completed drains:")
    assert table[at + 1] == (
        f"  default/api  completed {format_rfc3339(done_at)}, kept for the detector until "
        f"{format_rfc3339(done_at + timedelta(seconds=30))}"
    )
    assert table[at + 2].startswith("  default/cart  completed (being recorded), kept for")
    document = json.loads(status_json(status, "defaults"))
    assert problems(document, "status") == []
    assert document["held"] == [] and len(document["completed"]) == 2


def test_a_held_deployment_on_a_node_with_a_karpenter_deadline_names_it() -> None:
    state = replace(held_state(), node_deadlines={k.NODE: NOW + timedelta(seconds=30)})
    status = build_status(state, CONFIG, NOW)
    [held] = status.held
    assert held.deadline is not None and held.deadline.node == k.NODE
    assert held.decision is not None
    assert "Karpenter deletes this pod by 2026-05-01T12:00:30Z at the latest" in (
        held.decision.message
    )
    document = json.loads(status_json(status, "defaults"))
    assert problems(document, "status") == []
    assert document["held"][0]["terminationDeadline"]["nodeDeadline"] == "2026-05-01T12:00:30Z"
    assert "Karpenter deletes this pod" in status_table(status, "defaults", colour=False)
    plain = build_status(held_state(), CONFIG, NOW)
    assert plain.held[0].deadline is None
    assert json.loads(status_json(plain, "defaults"))["held"][0]["terminationDeadline"] is None


def test_the_ledgers_pods_and_the_failing_writes_are_listed() -> None:
    """Issue 37: the pods each Deployment's evictions ledger counts as gone (until their
    expiry), and the GracefulDrainWriteDeferred/Failed events that say a drain is held because
    the Deployment cannot be written for now, and why."""
    ledger = encode_ledger([
        LedgerEntry("api-1", "uid-1", NOW - timedelta(seconds=30)),
        LedgerEntry("api-2", "uid-2", NOW - timedelta(minutes=3)),  # expired: not listed
    ])  # fmt: skip
    api = k.deployment("api", annotations={EVICTIONS_ANNOTATION: ledger})
    deferred = {"involvedObject": {"namespace": "default", "name": "web"}, "count": 4,
                "reason": "GracefulDrainWriteDeferred",
                "lastTimestamp": format_rfc3339(NOW - timedelta(seconds=5)),
                "message": "graceful-drain: the rollout request (restarted-at) failed for now "
                           "(HTTP 503); the eviction is held"}  # fmt: skip
    state = held_state()
    state = replace(state, deployments=[*state.deployments, api], write_events=[deferred])
    status = build_status(state, CONFIG, NOW)

    [recorded] = status.recorded
    assert (recorded.deployment, recorded.pod) == ("api", "api-1")
    assert recorded.counts_until == NOW + timedelta(seconds=90)
    [failure] = status.write_failures
    assert (failure.deployment, failure.reason, failure.count) == (
        "web", "GracefulDrainWriteDeferred", 4,
    )  # fmt: skip
    document = json.loads(status_json(status, "defaults"))
    assert problems(document, "status") == []
    assert document["evictionsRecorded"][0]["pod"] == "api-1"
    assert document["writeFailures"][0]["reason"] == "GracefulDrainWriteDeferred"
    table = status_table(status, "defaults", colour=False)
    assert "default/web  GracefulDrainWriteDeferred  x4" in table
    assert "default/api  api-1  recorded" in table
