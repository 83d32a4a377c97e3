"""Part 3 under the real Karpenter, its pure pieces: what one disruption measured, what the
API server's audit log says of it, and the table that puts real Karpenter beside kubesim's
simulated Karpenter client on the same workload. Results in, a table out.

The floor of a disruption that keeps a Ready pod is the replacement's Ready time (measured:
on Karpenter's nodes it includes provisioning a node for the surge pods); the bound adds one
Karpenter retry: the step of its eviction back-off (`evictionQueueBaseDelay` doubling to
`evictionQueueMaxDelay`) in effect once the replacement is Ready.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.drain.real import DECISIONS_METRIC
from bench.drain.timings import KARPENTER_BASE, KARPENTER_MAX, retry_interval_at
from bench.procs import Usage
from bench.report import Column, Table, fixed
from bench.stats import percentile, ratio

REAL = "real Karpenter"
SIMULATED = "kubesim's Karpenter client"
# Who Karpenter is in the audit log: its ServiceAccount (realcluster/addons.py), and the
# user agent the simulated client sends (kubesim.scenario_runner.DRAIN_IDENTITIES).
KARPENTER_USER = "system:serviceaccount:karpenter:karpenter"
SIMULATED_AGENT = "karpenter"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
Obj = dict[str, Any]


def audit_datetime(text: str) -> dt.datetime:
    """An audit timestamp (RFC 3339, microseconds)."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def audit_time(text: str) -> float:
    """An audit timestamp as seconds since the epoch."""
    return audit_datetime(text).timestamp()


def is_karpenter(record: Obj) -> bool:
    """A request of real Karpenter or of kubesim's Karpenter-style client."""
    user = (record.get("user") or {}).get("username")
    return bool(user == KARPENTER_USER or record.get("userAgent") == SIMULATED_AGENT)


def is_eviction(record: Obj, namespace: str) -> bool:
    ref = record.get("objectRef") or {}
    return bool(
        record.get("verb") == "create"
        and ref.get("resource") == "pods"
        and ref.get("subresource") == "eviction"
        and ref.get("namespace") == namespace
    )


def is_deployment_write(record: Obj, namespace: str) -> bool:
    """A write of a Deployment in the workload's namespace, not of its status."""
    ref = record.get("objectRef") or {}
    return bool(
        record.get("verb") in ("patch", "update")
        and ref.get("resource") == "deployments"
        and not ref.get("subresource")
        and ref.get("namespace") == namespace
    )


# The audit annotation the API server adds to a request a webhook with `failurePolicy: Ignore`
# failed to answer in time (or at all): the eviction went through unchecked (k8s.io/apiserver
# pkg/admission/plugin/webhook/validating/dispatcher.go, "failed-open.validating.webhook...").
FAILED_OPEN_PREFIX = "failed-open.validating.webhook.admission.k8s.io/"


def failed_open(record: Obj) -> bool:
    """The API server let this request through without the webhook's answer."""
    return any(key.startswith(FAILED_OPEN_PREFIX) for key in record.get("annotations") or {})


def _code(record: Obj) -> int | None:
    code = (record.get("responseStatus") or {}).get("code")
    return int(code) if code is not None else None


@dataclass(frozen=True)
class AuditSummary:
    """The audit log's record of one disruption window."""

    writes: int  # every write request (create, update, patch, delete) in the window
    karpenter_writes: int  # those of the drain client (real or simulated Karpenter)
    answers: tuple[tuple[int, int], ...]  # (HTTP code, count) of the evictions in the
    # workload's namespace, by code: 429 held by graceful-drain, 201 allowed, 404 pod gone
    eviction_latencies: tuple[float, ...]  # seconds, received to answered (webhook included)
    # writes of the workloads' Deployments themselves (not their status): graceful-drain's
    # stamps, evictions-ledger records and the reconciler's writes (nothing else writes them)
    deployment_writes: int = 0
    # evictions the API server let through without graceful-drain's answer (its webhook did
    # not answer within timeoutSeconds; the shipped failurePolicy is Ignore)
    failed_open: int = 0

    @property
    def evictions(self) -> int:
        return sum(count for _, count in self.answers)

    def answered(self, code: int) -> int:
        return sum(count for answer, count in self.answers if answer == code)

    @property
    def answers_text(self) -> str:
        """'429: 14, 404: 2', or 'none'."""
        return ", ".join(f"{code}: {count}" for code, count in self.answers) or "none"

    @property
    def eviction_p99(self) -> float | None:
        ordered = sorted(self.eviction_latencies)
        return percentile(ordered, 99) if ordered else None


def summarize_audit(
    records: Iterable[Obj], namespace: str, start: float, end: float,
    drain_client: Callable[[Obj], bool] = is_karpenter,
) -> AuditSummary:  # fmt: skip
    """The requests the API server received within [start, end] (epoch seconds)."""
    writes = karpenter_writes = deployment_writes = unchecked = 0
    answers: Counter[int] = Counter()
    latencies: list[float] = []
    for record in records:
        received = record.get("requestReceivedTimestamp")
        if not received or record.get("stage", "ResponseComplete") != "ResponseComplete":
            continue
        at = audit_time(received)
        if not start <= at <= end:
            continue
        if record.get("verb") in WRITE_VERBS:
            writes += 1
            if drain_client(record):
                karpenter_writes += 1
            if is_deployment_write(record, namespace):
                deployment_writes += 1
        if is_eviction(record, namespace):
            answers[_code(record) or 0] += 1
            unchecked += failed_open(record)
            if record.get("stageTimestamp"):  # exact to the microsecond, unlike epoch floats
                answered = audit_datetime(record["stageTimestamp"]) - audit_datetime(received)
                latencies.append(answered.total_seconds())
    return AuditSummary(writes, karpenter_writes, tuple(sorted(answers.items())),
                        tuple(latencies), deployment_writes, unchecked)  # fmt: skip


_DECISION = re.compile(r'^' + re.escape(DECISIONS_METRIC)
                       + r'\{allowed="(true|false)",reason="([^"]+)"\} (\S+)$')  # fmt: skip


def allowed_by_reason(metrics: str) -> dict[str, float]:
    """The controller's allowed admission decisions so far, by reason, from its Prometheus
    text (`graceful_drain_decisions_total{allowed="true",reason=...}`)."""
    counts: dict[str, float] = {}
    for line in metrics.splitlines():
        match = _DECISION.match(line)
        if match and match[1] == "true":
            counts[match[2]] = counts.get(match[2], 0.0) + float(match[3])
    return counts


def allowed_between(before: str, after: str) -> tuple[tuple[str, int], ...]:
    """The allowed decisions made between two scrapes, by reason (those that grew)."""
    first, second = allowed_by_reason(before), allowed_by_reason(after)
    grown = {reason: int(count - first.get(reason, 0.0)) for reason, count in second.items()}
    return tuple(sorted((reason, n) for reason, n in grown.items() if n > 0))


@dataclass(frozen=True)
class KarpenterRun:
    """One disruption of the nodes holding N protected Deployments, by one client."""

    client: str  # REAL or SIMULATED
    count: int
    nodes: int  # Karpenter's nodes that held the pods
    done: float | None  # real: the last node deleted; simulated: its drain returned
    surge_ready: tuple[float | None, ...]  # per Deployment, from the start to 2 Ready pods
    zero_ready: tuple[float, ...]  # per Deployment, seconds with no Ready pod
    audit: AuditSummary
    usage: Usage | None  # the graceful-drain controller's process over the window
    error: str | None = None
    allowed: tuple[tuple[str, int], ...] = ()  # graceful-drain's allowed decisions, by reason

    @property
    def replacement_ready(self) -> float | None:
        if not self.surge_ready or any(at is None for at in self.surge_ready):
            return None
        return max(at for at in self.surge_ready if at is not None)

    @property
    def with_retry(self) -> float | None:
        """The floor (the replacement's Ready time) + the Karpenter back-off step in effect
        then: the latest a client that must retry its eviction would be done."""
        ready = self.replacement_ready
        if ready is None:
            return None
        return ready + retry_interval_at(ready, KARPENTER_BASE, KARPENTER_MAX)


def find_run(runs: Sequence[KarpenterRun], client: str, count: int) -> KarpenterRun | None:
    for run in runs:
        if (run.client, run.count) == (client, count):
            return run
    return None


COLUMNS = [
    Column("count", "N"),
    Column("client", "drain client"),
    Column("nodes", "nodes"),
    Column("floor", "floor: replacement Ready s", fixed(2)),
    Column("with_retry", "floor + one retry s", fixed(2)),
    Column("done", "done s", fixed(2)),
    Column("vs_floor", "÷ floor", fixed(2)),
    Column("vs_retry", "÷ (floor + retry)", fixed(2)),
    Column("vs_sim", "÷ kubesim's client", fixed(2)),
    Column("zero", "zero-Ready s (max)", fixed(2)),
    Column("evictions", "evictions by answer"),
    Column("allowed", "allowed by graceful-drain"),
    Column("failed_open", "let through unchecked (webhook late)"),
    Column("writes", "API writes / pod", fixed(1)),
    Column("karpenter_writes", "of which Karpenter's / pod", fixed(1)),
    Column("deployment_writes", "Deployment writes / protected pod", fixed(2)),
    Column("per_allowed", "Deployment writes / allowed eviction", fixed(2)),
    Column("cpu", "controller CPU s", fixed(2)),
    Column("rss", "controller RSS MiB (max)", fixed(0)),
    Column("p99", "eviction p99 ms", fixed(1)),
]


def _row(run: KarpenterRun, simulated: KarpenterRun | None) -> dict[str, object]:
    audit = run.audit
    floor, with_retry = run.replacement_ready, run.with_retry
    reference = simulated if simulated is not None and run is not simulated else None
    return {
        "count": run.count,
        "client": run.client if run.error is None else f"{run.client} ({run.error})",
        "nodes": run.nodes,
        "floor": floor,
        "with_retry": with_retry,
        "done": run.done,
        "vs_floor": _ratio(run.done, floor),
        "vs_retry": _ratio(run.done, with_retry),
        "vs_sim": _ratio(run.done, None if reference is None else reference.done),
        "zero": max(run.zero_ready, default=0.0),
        "evictions": audit.answers_text,
        "allowed": ", ".join(f"{reason}: {n}" for reason, n in run.allowed) or "none",
        "failed_open": audit.failed_open,
        "writes": audit.writes / run.count,
        "karpenter_writes": audit.karpenter_writes / run.count,
        "deployment_writes": audit.deployment_writes / run.count,
        "per_allowed": (
            audit.deployment_writes / audit.answered(201) if audit.answered(201) else None
        ),
        "cpu": None if run.usage is None else run.usage.cpu_seconds,
        "rss": None if run.usage is None else run.usage.rss_max_bytes / 2**20,
        "p99": None if audit.eviction_p99 is None else audit.eviction_p99 * 1000,
    }


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None:
        return None
    return ratio(value, reference)


def build_karpenter_table(runs: Sequence[KarpenterRun], counts: Sequence[int],
                          readiness_delay: float, skipped: str | None) -> Table:  # fmt: skip
    table = Table(
        "drain_karpenter",
        "Disruption under the real Karpenter beside kubesim's Karpenter client (real control "
        "plane, real time)",
        COLUMNS,
    )  # fmt: skip
    if skipped is not None:
        table.notes.append(f"Real Karpenter: not run — {skipped}.")
        return table
    for count in counts:
        simulated = find_run(runs, SIMULATED, count)
        for client in (SIMULATED, REAL):
            run = find_run(runs, client, count)
            if run is not None:
                table.add(**_row(run, simulated))  # type: ignore[arg-type]
    table.notes += [
        "Real control plane (realcluster/) with Karpenter v1.8's KWOK provider "
        "(sigs.k8s.io/karpenter/kwok) as a process under its chart's RBAC, and the "
        "graceful-drain controller in a process of its own (its default rolloutTimeout, "
        "600 s), its webhook registered by URL. Per N: a NodePool of its own, N single-replica "
        f"Deployments (maxSurge 1, maxUnavailable 0, Ready R = {readiness_delay:g} s after "
        "start, unscaled: Karpenter's timings are constants) on the KWOK nodes Karpenter "
        "provisioned for them. Then two disruptions, each from a settled cluster, of the nodes "
        "holding the pods: kubesim's Karpenter-style client drains them (taint, evictions with "
        "back-off from 100 ms to 10 s, upstream's figures), the harness having cordoned them "
        "(real Karpenter removes karpenter.sh/disrupted from nodes of its own it is not "
        "disrupting, pkg/controllers/disruption/controller.go); then their NodeClaims are "
        "deleted (what `kubectl delete nodeclaim` does) and real Karpenter disrupts them: "
        "taint, evictions, node deleted. Both times Karpenter provisions the node the surge "
        "pods run on.",
        "'floor' is the replacement's Ready time: when the last Deployment had its surge pod "
        "Ready beside the old one, from the start (it includes Karpenter provisioning a node "
        "for the surge pods); 'floor + one retry' adds the Karpenter back-off step in effect "
        "then (evictionQueueBaseDelay 100 ms doubling to evictionQueueMaxDelay 10 s, "
        "sigs.k8s.io/karpenter pkg/controllers/node/termination/terminator/eviction.go). "
        "'done' is the last node deleted for real Karpenter, the last drain's return for "
        "kubesim's client (which leaves the node in place). A drain can end before its next "
        "retry: the rollout's own scale-down deletes the old pod once its replacement is "
        "Ready, and the client only has to see it gone.",
        "From the API server's audit log over the window (the start to every Deployment "
        "Ready again and, for real Karpenter, the nodes gone): evictions in the namespace and "
        "the 429s among them, every write request (all clients: Karpenter, graceful-drain, "
        "the controller manager, the scheduler, kwok) and the drain client's, per protected "
        "pod; 'let through unchecked' counts the evictions whose record carries the API "
        "server's failed-open annotation: graceful-drain's webhook did not answer within its "
        "timeoutSeconds (5 s) and the shipped failurePolicy (Ignore) let them go without a "
        "decision; 'eviction p99' is the API server's time from receiving an eviction to answering "
        "it, graceful-drain's webhook call included, nearest rank. 'controller CPU/RSS' is "
        "the graceful-drain controller's process over the same window (/proc).",
        "The 2 cores are shared with other engineers' builds and tests: compare the ratios "
        "(measured minutes apart in one run), not the seconds, across runs.",
    ]
    return table
