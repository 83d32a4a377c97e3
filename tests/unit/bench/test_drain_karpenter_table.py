"""Part 3 under the real Karpenter, its pure pieces: the audit log's summary of a window, the
floor and its one-retry bound, the table beside kubesim's client, and the process sampler."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from bench.drain.karpenter_table import (
    FAILED_OPEN_PREFIX,
    KARPENTER_USER,
    REAL,
    SIMULATED,
    AuditSummary,
    KarpenterRun,
    allowed_between,
    allowed_by_reason,
    audit_time,
    build_karpenter_table,
    summarize_audit,
)
from bench.drain.timings import KARPENTER_BASE, KARPENTER_MAX
from bench.procs import Usage, UsageSampler, cpu_seconds, rss_bytes
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.controller.decision.reasons import Decision, Reason
from graceful_drain.controller.serving.metrics import Metrics

NS = "karpenter-10"
START = audit_time("2026-12-06T06:00:00.000000Z")
END = audit_time("2026-12-06T06:00:30.000000Z")


def record(verb: str, at: str, *, resource: str = "pods", namespace: str | None = NS,
           subresource: str | None = None, code: int = 200, user: str = "admin",
           agent: str = "kubectl", answered: str | None = None,
           stage: str = "ResponseComplete") -> dict[str, Any]:  # fmt: skip
    ref: dict[str, Any] = {"resource": resource, "namespace": namespace}
    if subresource:
        ref["subresource"] = subresource
    return {
        "stage": stage,
        "verb": verb,
        "objectRef": ref,
        "user": {"username": user},
        "userAgent": agent,
        "responseStatus": {"code": code},
        "requestReceivedTimestamp": f"2026-12-06T06:00:{at}Z",
        "stageTimestamp": f"2026-12-06T06:00:{answered or at}Z",
    }


def eviction(at: str, code: int, answered: str, **kw: Any) -> dict[str, Any]:
    return record("create", at, subresource="eviction", code=code, answered=answered, **kw)


def test_the_audit_window_counts_writes_karpenters_writes_and_evictions_by_answer() -> None:
    records = [
        # before and after the window: not counted
        {
            **record("patch", "00.000000", resource="deployments"),
            "requestReceivedTimestamp": "2026-12-06T05:59:59.999000Z",
        },
        record("create", "30.000100", resource="events"),
        # reads are not writes
        record("get", "01.000000"),
        record("watch", "01.000000"),
        record("list", "01.000000", resource="nodes", namespace=None),
        # writes: the controller's stamp, kwok's status, real Karpenter's taint, the
        # simulated client's event
        record("patch", "02.000000", resource="deployments", agent="python-httpx/0.28"),
        record("patch", "03.000000", subresource="status", user="kwok"),
        record("patch", "04.000000", resource="nodes", namespace=None, user=KARPENTER_USER),
        record("create", "05.000000", resource="events", agent="karpenter"),
        # evictions: held twice, then the pod gone; one in another namespace; one only
        # received (a stage the policy omits, never counted)
        eviction("06.000000", 429, "06.004000", user=KARPENTER_USER),
        eviction("07.000000", 429, "07.120000", user=KARPENTER_USER),
        eviction("08.000000", 404, "08.002000", user=KARPENTER_USER),
        eviction("09.000000", 201, "09.003000", namespace="elsewhere", user=KARPENTER_USER),
        eviction("10.000000", 201, "10.001000", stage="RequestReceived"),
        # allowed by the API server without the webhook's answer (failurePolicy Ignore)
        {
            **eviction("11.000000", 201, "17.000000", user=KARPENTER_USER),
            "annotations": {
                "authorization.k8s.io/decision": "allow",
                f"{FAILED_OPEN_PREFIX}round_0_index_0": "eviction.graceful-drain.stonal.com",
            },
        },
    ]
    summary = summarize_audit(records, NS, START, END)
    assert summary.writes == 9  # 4 plain writes + 5 counted evictions (creates)
    assert summary.deployment_writes == 1  # the stamp; kwok's status patch is not one
    assert summary.karpenter_writes == 7  # its node patch, the event, its 5 evictions
    assert summary.answers == ((201, 1), (404, 1), (429, 2))
    assert summary.evictions == 4 and summary.answered(429) == 2
    assert summary.answers_text == "201: 1, 404: 1, 429: 2"
    assert summary.failed_open == 1  # only the eviction the API server let through unchecked
    assert sorted(summary.eviction_latencies) == pytest.approx([0.002, 0.004, 0.12, 6.0])
    assert summary.eviction_p99 == pytest.approx(6.0)


def test_an_empty_window_has_no_p99_and_says_none() -> None:
    summary = summarize_audit([], NS, START, END)
    assert summary == AuditSummary(0, 0, (), ())
    assert summary.eviction_p99 is None
    assert summary.answers_text == "none"


def run(client: str, count: int, *, done: float | None, surge: float | None,
        zero: float = 0.0) -> KarpenterRun:  # fmt: skip
    audit = AuditSummary(40 * count, 12 * count, ((404, 1), (429, 7 * count)), (0.01, 0.2))
    return KarpenterRun(client, count, 1, done, (surge,) * count, (zero,) * count, audit,
                        Usage(0.5, 80 * 2**20))  # fmt: skip


@pytest.mark.parametrize(
    ("ready", "retry"),
    [
        (0.05, 0.1),  # the first retry, 0.1 s after the first refusal
        (0.3, 0.2),  # 0.1 + 0.2: exactly at the second retry
        (1.0, 0.8),  # 0.1 + 0.2 + 0.4 = 0.7 < 1.0 <= 1.5
        (12.86, 10.0),  # past 12.7 s, the next step is the 10 s cap
        (100.0, 10.0),
    ],
)
def test_floor_plus_one_retry_is_the_back_off_step_in_effect_when_the_replacement_is_ready(
    ready: float, retry: float
) -> None:
    measured = run(REAL, 10, done=ready + 1, surge=ready)
    assert measured.replacement_ready == ready
    assert measured.with_retry == pytest.approx(ready + retry)


@given(st.floats(min_value=0.0, max_value=1000.0, allow_nan=False))
def test_the_retry_added_to_the_floor_is_a_step_of_karpenters_back_off(ready: float) -> None:
    step = run(REAL, 1, done=None, surge=ready).with_retry
    assert step is not None
    steps = [min(KARPENTER_BASE * 2**k, KARPENTER_MAX) for k in range(12)]
    assert any(step - ready == pytest.approx(s) for s in steps)


def test_a_deployment_whose_replacement_never_was_ready_leaves_no_floor() -> None:
    measured = KarpenterRun(REAL, 2, 1, 30.0, (5.0, None), (0.0, 4.0),
                            AuditSummary(0, 0, (), ()), None)  # fmt: skip
    assert measured.replacement_ready is None and measured.with_retry is None


def test_the_table_puts_real_karpenter_beside_kubesims_client_with_ratios() -> None:
    runs = [
        run(SIMULATED, 10, done=13.0, surge=12.0),
        run(REAL, 10, done=19.5, surge=13.0),
        run(REAL, 50, done=26.0, surge=20.0, zero=1.5),  # kubesim's N = 50 missing
    ]
    table = build_karpenter_table(runs, (10, 50), 10.0, None)
    rows = [(row["count"], row["client"]) for row in table.rows]
    assert rows == [(10, SIMULATED), (10, REAL), (50, REAL)]
    sim, real, alone = table.rows
    assert sim["vs_sim"] is None  # not against itself
    assert real["vs_sim"] == pytest.approx(19.5 / 13.0)
    assert real["vs_floor"] == pytest.approx(19.5 / 13.0)
    assert real["with_retry"] == pytest.approx(23.0)
    assert real["vs_retry"] == pytest.approx(19.5 / 23.0)
    assert alone["vs_sim"] is None and alone["zero"] == 1.5
    assert real["evictions"] == "404: 1, 429: 70"
    assert real["writes"] == 40 and real["karpenter_writes"] == 12
    assert real["cpu"] == 0.5 and real["rss"] == 80
    assert real["p99"] == pytest.approx(200.0)
    assert real["failed_open"] == 0
    assert "R = 10 s" in table.notes[0]


def test_a_failed_run_names_its_error_and_a_skipped_part_only_says_why() -> None:
    nothing = AuditSummary(0, 0, (), ())
    failed = KarpenterRun(REAL, 10, 1, None, (None,) * 10, (0.0,) * 10, nothing, None,
                          "not done within the bound")  # fmt: skip
    [row] = build_karpenter_table([failed], (10,), 10.0, None).rows
    assert row["client"] == f"{REAL} (not done within the bound)"
    assert row["done"] is None and row["vs_floor"] is None and row["cpu"] is None
    skipped = build_karpenter_table([], (10, 50), 10.0, "Karpenter is not built")
    assert skipped.rows == []
    assert skipped.notes == ["Real Karpenter: not run — Karpenter is not built."]


def test_the_sampler_reads_another_process_cpu_and_peak_rss_from_proc() -> None:
    async def burn() -> Usage | None:
        async with UsageSampler(os.getpid(), interval=0.01) as sampler:
            before = cpu_seconds(os.getpid())
            while cpu_seconds(os.getpid()) - before < 0.05:  # bounded: CPU time always advances
                sum(range(10_000))
            await asyncio.sleep(0)
        return sampler.usage

    usage = asyncio.run(burn())
    assert usage is not None
    assert usage.cpu_seconds >= 0.05
    assert usage.rss_max_bytes >= rss_bytes() // 2


def exposition(*allowed: Reason, held: int = 0) -> str:
    """The controller's own /metrics text after `allowed` decisions and `held` 429s."""
    metrics = Metrics()
    for reason in allowed:
        metrics.record_decision(Decision(True, reason, "allowed"), 0.001)
    for _ in range(held):
        metrics.record_decision(Decision(False, Reason.ROLLOUT_IN_PROGRESS, "held"), 0.001)
    return metrics.exposition().decode()


def test_the_allowed_decisions_of_a_window_are_read_by_reason_from_the_controllers_metrics() -> (
    None
):
    before = exposition(Reason.DRY_RUN, Reason.SURGE_READY, held=3)
    after = exposition(Reason.DRY_RUN, Reason.SURGE_READY, Reason.SURGE_READY,
                       Reason.SURGE_READY, Reason.POD_TERMINATING, held=9)  # fmt: skip
    assert allowed_by_reason(after)["surge-ready"] == 3
    assert "rollout-in-progress" not in allowed_by_reason(after)  # a 429 is not allowed
    assert allowed_between(before, after) == (("pod-terminating", 1), ("surge-ready", 2))
    assert allowed_between(after, after) == ()
