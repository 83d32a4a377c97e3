"""`build_status`: held Deployments with the webhook's own answer, timeouts, webhook, leader."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from graceful_drain.controller.decide import DecisionConfig
from graceful_drain.controller.model import RESTARTED_AT_ANNOTATION
from graceful_drain.inspection.render import status_json, status_table
from graceful_drain.inspection.status import LeaderState, StatusState, build_status
from graceful_drain.inspection.webhook_health import WebhookHealth
from graceful_drain.kube.timefmt import format_rfc3339

from . import cluster_objects as k
from .documented_schema import problems

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
CONFIG = DecisionConfig(rollout_timeout=timedelta(minutes=5))
HEALTHY = WebhookHealth("graceful-drain", True, "valid", "verified", "127.0.0.1:8443",
                        "graceful-drain-webhook.graceful-drain.svc", "ok")  # fmt: skip
MISSING = WebhookHealth("graceful-drain", False, "missing", "not-checked", None, None, "absent")
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
    assert row.split()[1:4] == ["1m15s", "3m45s", "1/1"]
