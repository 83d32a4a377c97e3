"""Output of `plan` and `status`: a table for people (colour only on a terminal) and the
stable documents described in docs/cli.md (schemaVersion 2), as JSON or YAML."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from graceful_drain.controller.decision.deadline import deadline_json
from graceful_drain.controller.decision.reasons import Decision
from graceful_drain.inspection.plan import Outcome, Plan, PodPlan, Verdict
from graceful_drain.inspection.status import HeldDeployment, Replacement, Status
from graceful_drain.inspection.webhook_health import WebhookHealth
from graceful_drain.kube import yamltext
from graceful_drain.kube.timefmt import format_go_duration, format_rfc3339

SCHEMA_VERSION = 2  # 2: a decision is keyed by its reason alone

_RED, _GREEN, _YELLOW, _BOLD, _RESET = "\033[31m", "\033[32m", "\033[33m", "\033[1m", "\033[0m"


def document_text(document: dict[str, Any], output: str) -> str:
    """`document` as `-o json` (indented, as --json always printed it) or `-o yaml`."""
    if output == "yaml":
        return yamltext.dump(document).rstrip("\n")
    return json.dumps(document, indent=2)


def _seconds(duration: timedelta | None) -> float | None:
    return None if duration is None else duration.total_seconds()


def _decision_json(decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {
        "allowed": decision.allowed,
        "reason": decision.reason.value,
        "message": decision.message,
        "deployment": None if decision.deployment is None else str(decision.deployment),
        "waitedSeconds": _seconds(decision.waited),
    }


def _webhook_json(webhook: WebhookHealth) -> dict[str, Any]:
    return {
        "configuration": webhook.configuration,
        "registered": webhook.registered,
        "protection": webhook.protection,
        "failurePolicy": webhook.failure_policy,
        "caBundle": webhook.ca_bundle,
        "certificate": webhook.certificate,
        "answer": webhook.answer,
        "endpoint": webhook.endpoint,
        "serverName": webhook.server_name,
        "healthy": webhook.healthy,
        "problem": webhook.problem,
        "detail": webhook.detail,
        "consequence": webhook.consequence,
    }


def _webhook_summary(webhook: WebhookHealth) -> str:
    """One line: unprotected (and what that does to a drain) / not verified / protected."""
    if webhook.protection == "unprotected":
        return f"UNPROTECTED: {webhook.consequence} ({webhook.configuration}: {webhook.detail})"
    if webhook.protection == "unverified":
        return f"not verified: {webhook.configuration}: {webhook.detail}"
    return f"ok: {webhook.configuration}: {webhook.detail}"


# --- plan -------------------------------------------------------------------------------------


def plan_json(plan: Plan, config_source: str) -> str:
    return json.dumps(plan_document(plan, config_source), indent=2)


def plan_document(plan: Plan, config_source: str) -> dict[str, Any]:
    """The DrainPlan document (`-o json` and `-o yaml` print it)."""
    pods = [
        {
            "namespace": pod.namespace,
            "name": pod.name,
            "workload": pod.workload,
            "ready": pod.ready,
            "outcome": pod.outcome.value,
            "outage": pod.outage,
            "reason": pod.reason,
            "message": pod.message,
            "budget": pod.budget,
            "fix": list(pod.fix),
            "kubectlFlags": list(pod.kubectl_flags),
            "expectedWaitSeconds": _seconds(pod.expected_wait),
            "expectedWaitSource": pod.expected_wait_source,
            "decision": _decision_json(pod.decision),
            "terminationDeadline": deadline_json(pod.deadline, plan.generated_at),
        }
        for pod in plan.pods
    ]
    document = {
        "kind": "DrainPlan",
        "schemaVersion": SCHEMA_VERSION,
        "node": plan.node,
        "generatedAt": format_rfc3339(plan.generated_at),
        "verdict": plan.verdict.value,
        "exitCode": plan.exit_code,
        "outages": plan.outage_workloads,
        "blocked": [f"{pod.namespace}/{pod.name}" for pod in plan.blocked],
        "kubectlDrainFlags": list(plan.kubectl_flags),
        "controller": {
            "webhookRegistered": plan.webhook_registered,
            "rolloutTimeoutSeconds": plan.config.rollout_timeout.total_seconds(),
            "enabledAnnotation": plan.config.enabled_annotation,
            "configSource": config_source,
        },
        "webhook": _webhook_json(plan.webhook),
        "pods": pods,
    }
    return document


class _Painter:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if self.colour else text


_OUTCOME_COLOUR = {
    Outcome.HELD: _GREEN,
    Outcome.EVICTED: _YELLOW,
    Outcome.BLOCKED: _RED,
    Outcome.IGNORED: "",
    Outcome.SKIPPED: "",
}


def _table(rows: list[list[str]], widths_from: list[list[str]]) -> list[str]:
    """Left-aligned columns; widths from the uncoloured text, the last column unpadded."""
    widths = [max(len(row[i]) for row in widths_from) for i in range(len(widths_from[0]) - 1)]
    lines = []
    for row, plain in zip(rows, widths_from, strict=True):
        cells = [
            cell + " " * (width - len(text))
            for cell, text, width in zip(row, plain, widths, strict=False)
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def _why(pod: PodPlan) -> str:
    text = pod.message
    if pod.expected_wait is not None:
        text += (
            f" [expected wait ~{format_go_duration(pod.expected_wait)}, "
            f"from {pod.expected_wait_source}]"
        )
    if pod.fix:
        text += f" [fix: {'; '.join(pod.fix)}]"
    return text


def plan_table(plan: Plan, config_source: str, *, colour: bool) -> str:
    paint = _Painter(colour)
    webhook = {"protected": "webhook protects evictions", "unverified": "webhook not verified",
               "unprotected": "webhook UNPROTECTED"}[plan.webhook.protection]  # fmt: skip
    header = (
        f"Drain plan for node {plan.node} ({webhook}; rolloutTimeout "
        f"{format_go_duration(plan.config.rollout_timeout)} from {config_source})"
    )
    plain = [["POD", "WORKLOAD", "OUTCOME", "OUTAGE", "WHY"]]
    rows = [list(plain[0])]
    for pod in plan.pods:
        cells = [f"{pod.namespace}/{pod.name}", pod.workload, pod.outcome.value,
                 "YES" if pod.outage else "no", _why(pod)]  # fmt: skip
        plain.append(cells)
        coloured = list(cells)
        coloured[2] = paint(cells[2], _OUTCOME_COLOUR[pod.outcome])
        if pod.outage:
            coloured[3] = paint(cells[3], _RED)
        rows.append(coloured)
    lines = [header]
    if plan.webhook.protection == "unverified":
        lines.append(f"Webhook {_webhook_summary(plan.webhook)}")
    lines.extend(_table(rows, plain))
    if not plan.pods:
        lines.append("(no pods on this node)")
    if plan.kubectl_flags:
        lines.append(f"kubectl drain needs: {' '.join(plan.kubectl_flags)}")
    lines.append(_verdict_line(plan, paint))
    return "\n".join(lines)


def _verdict_line(plan: Plan, paint: _Painter) -> str:
    outages = len(plan.outage_workloads)
    if plan.verdict is Verdict.UNPROTECTED:
        webhook = plan.webhook
        text = (
            f"unprotected: webhook {webhook.configuration} does not protect evictions "
            f"({webhook.detail}); {webhook.consequence}"
        )
        if outages:
            text += f"; {outages} outage(s): {', '.join(plan.outage_workloads)}"
        if plan.blocked:
            text += f"; {len(plan.blocked)} pod(s) blocked"
        return paint(f"Verdict: {text}", _RED + _BOLD)
    if plan.verdict is Verdict.BLOCKED:
        text = f"blocked: {len(plan.blocked)} pod(s) refused by a PodDisruptionBudget" + (
            f", and {outages} outage(s)" if outages else ""
        )
        return paint(f"Verdict: {text}", _RED + _BOLD)
    if plan.verdict is Verdict.OUTAGE:
        names = ", ".join(plan.outage_workloads)
        return paint(f"Verdict: {outages} outage(s): {names}", _RED + _BOLD)
    return paint("Verdict: safe", _GREEN + _BOLD)


# --- status -----------------------------------------------------------------------------------


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else format_rfc3339(moment)


def _held_json(held: HeldDeployment, now: datetime) -> dict[str, Any]:
    return {
        "namespace": held.namespace,
        "name": held.name,
        "restartedAt": held.restarted_at,
        "waitedSeconds": held.waited.total_seconds(),
        "waited": format_go_duration(held.waited),
        "timeLeftSeconds": held.time_left.total_seconds(),
        "timeLeft": format_go_duration(held.time_left),
        "escapeHatchOpen": held.time_left == timedelta(0),
        "rollout": {
            "replicas": held.replicas,
            "updated": held.updated,
            "ready": held.ready,
            "available": held.available,
            "complete": held.rollout_complete,
        },
        "nodes": list(held.nodes),
        "pod": held.pod,
        "decision": _decision_json(held.decision),
        "replacementsReady": held.replacements_ready,
        "replacements": [_replacement_json(pod) for pod in held.replacements],
        "terminationDeadline": deadline_json(held.deadline, now),
    }


def _replacement_json(pod: Replacement) -> dict[str, Any]:
    return {
        "name": pod.name,
        "phase": pod.phase,
        "node": pod.node,
        "ready": pod.ready,
        "reason": pod.reason,
        "message": pod.message,
    }


def _replacement_line(held: HeldDeployment, pod: Replacement) -> str:
    where = f"on {pod.node}" if pod.node else "not scheduled"
    why = f" ({pod.reason}: {pod.message})" if pod.reason or pod.message else ""
    ready = "Ready" if pod.ready else "not Ready"
    return (
        f"  {held.namespace}/{held.name} replacement {pod.name}: {pod.phase}, {where}, {ready}{why}"
    )


def status_json(status: Status, config_source: str) -> str:
    return json.dumps(status_document(status, config_source), indent=2)


def status_document(status: Status, config_source: str) -> dict[str, Any]:
    """The DrainStatus document (`-o json` and `-o yaml` print it)."""
    webhook, leader = status.webhook, status.leader
    document = {
        "kind": "DrainStatus",
        "schemaVersion": SCHEMA_VERSION,
        "generatedAt": format_rfc3339(status.generated_at),
        "exitCode": status.exit_code,
        "controller": {
            "rolloutTimeoutSeconds": status.config.rollout_timeout.total_seconds(),
            "enabledAnnotation": status.config.enabled_annotation,
            "configSource": config_source,
        },
        "held": [_held_json(held, status.generated_at) for held in status.held],
        "completed": [
            {
                "namespace": c.namespace,
                "name": c.name,
                "restartedAt": c.restarted_at,
                "completedAt": c.completed_at,
                "keptUntil": format_rfc3339(c.kept_until),
            }
            for c in status.completed
        ],
        "timeouts": [
            {
                "namespace": t.namespace,
                "deployment": t.deployment,
                "lastSeen": t.last_seen,
                "count": t.count,
                "message": t.message,
            }
            for t in status.timeouts
        ],
        "evictionsRecorded": [
            {
                "namespace": r.namespace,
                "deployment": r.deployment,
                "pod": r.pod,
                "recordedAt": format_rfc3339(r.recorded_at),
                "countsUntil": format_rfc3339(r.counts_until),
            }
            for r in status.recorded
        ],
        "writeFailures": [
            {
                "namespace": t.namespace,
                "deployment": t.deployment,
                "reason": t.reason,
                "lastSeen": t.last_seen,
                "count": t.count,
                "message": t.message,
            }
            for t in status.write_failures
        ],
        "webhook": _webhook_json(webhook),
        "leader": {
            "lease": leader.lease,
            "leaderElect": status.leader_elect,
            "present": leader.present,
            "holder": leader.holder,
            "renewedAt": _time(leader.renewed_at),
            "durationSeconds": _seconds(leader.duration),
            "held": status.leader_present,
        },
    }
    return document


def _leader_line(status: Status) -> str:
    leader = status.leader
    if not leader.present:
        suffix = "" if status.leader_elect else " (leader election is off)"
        return f"Leader: Lease {leader.lease} not found{suffix}"
    state = "held" if status.leader_present else "NOT held (expired or released)"
    renewed = "" if leader.renewed_at is None else f", renewed {_time(leader.renewed_at)}"
    return f"Leader: Lease {leader.lease} {state} by {leader.holder or '(nobody)'}{renewed}"


def status_table(status: Status, config_source: str, *, colour: bool) -> str:
    paint = _Painter(colour)
    webhook = status.webhook
    colour_of = {"protected": _GREEN, "unverified": _YELLOW, "unprotected": _RED + _BOLD}
    lines = [
        paint(f"Webhook: {_webhook_summary(webhook)}", colour_of[webhook.protection]),
        _leader_line(status),
        f"rolloutTimeout {format_go_duration(status.config.rollout_timeout)} "
        f"(from {config_source})",
        "",
    ]
    if status.held:
        plain = [["DEPLOYMENT", "STAMP AGE", "TIME LEFT", "REPLACEMENT", "NODE", "WEBHOOK SAYS"]]
        rows = [list(plain[0])]
        for held in status.held:
            rollout = (
                f"{held.replacements_ready}/{len(held.replacements)} ready"
                if held.replacements
                else "not made yet"
            )
            says = "-" if held.decision is None else held.decision.message
            if webhook.protection == "unprotected":  # what it would say, nobody hears it
                says = "nothing: it does not answer"
            cells = [f"{held.namespace}/{held.name}", format_go_duration(held.waited),
                     format_go_duration(held.time_left), rollout,
                     ",".join(held.nodes) or "-", says]  # fmt: skip
            plain.append(cells)
            coloured = list(cells)
            if held.time_left == timedelta(0):
                coloured[2] = paint(cells[2], _RED)
            rows.append(coloured)
        lines.extend(_table(rows, plain))
        lines.extend(
            _replacement_line(held, pod) for held in status.held for pod in held.replacements
        )
    else:
        lines.append("No Deployment is held.")
    if status.completed:
        lines.append("")
        lines.append("Completed drains:")
        lines.extend(
            f"  {c.namespace}/{c.name}  completed "
            f"{c.completed_at or '(being recorded)'}, kept for the detector until "
            f"{format_rfc3339(c.kept_until)}"
            for c in status.completed
        )
    lines.append("")
    if status.timeouts:
        lines.append("Recent timeouts (GracefulDrainTimeout):")
        lines.extend(
            f"  {t.last_seen}  {t.namespace}/{t.deployment}  x{t.count}  {t.message}"
            for t in status.timeouts
        )
    else:
        lines.append("No recent timeouts.")
    if status.write_failures:
        lines.append("")
        lines.append(
            "Writes to Deployments that failed (GracefulDrainWriteDeferred: the drain is held "
            "while the controller retries; GracefulDrainWriteFailed: allowed without it):"
        )
        lines.extend(
            f"  {t.last_seen}  {t.namespace}/{t.deployment}  {t.reason}  x{t.count}  {t.message}"
            for t in status.write_failures
        )
    if status.recorded:
        lines.append("")
        lines.append("Pods let go, counted as gone (the evictions ledger):")
        lines.extend(
            f"  {r.namespace}/{r.deployment}  {r.pod}  recorded {format_rfc3339(r.recorded_at)}, "
            f"counts until {format_rfc3339(r.counts_until)}"
            for r in status.recorded
        )
    return "\n".join(lines)
