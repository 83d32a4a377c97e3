"""Where one admission's CPU time goes inside the webhook, measured in-process over the mix.

Stages, each timed on its own over every request of the mix, best of a few rounds:
- parse: `parse_review` (JSON decode + validation into an EvictionRequest);
- review: `EvictionWebhook.review` whole (parse, cache lookups, decide, encode the answer);
- encode: `encode_review_response` alone;
- observe: what the handler does after answering (one JSON log line + Prometheus metrics).
"decide" is review minus parse and encode. HTTP and TLS are not in here: the reference
server's CPU per request measures them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bench.webhook.population import PreparedRequest
from graceful_drain.controller.admission import encode_review_response, parse_review
from graceful_drain.controller.webhook import EvictionWebhook, Outcome

STAGES = ("parse", "decide", "encode", "observe")


async def measure(webhook: EvictionWebhook, requests: Sequence[PreparedRequest],
                  rounds: int = 5) -> dict[str, float]:  # fmt: skip
    """Microseconds per request for each stage (and "review", "total")."""
    bodies = [prepared.body for prepared in requests]
    outcomes: list[Outcome] = [(await webhook.review(body))[1] for body in bodies]
    count = len(bodies)
    best = {"parse": float("inf"), "review": float("inf"), "encode": float("inf"),
            "observe": float("inf")}  # fmt: skip
    for _ in range(rounds):
        started = time.perf_counter()
        for body in bodies:
            parse_review(body)
        best["parse"] = min(best["parse"], time.perf_counter() - started)
        started = time.perf_counter()
        for body in bodies:
            await webhook.review(body)
        best["review"] = min(best["review"], time.perf_counter() - started)
        started = time.perf_counter()
        for outcome in outcomes:
            encode_review_response("4f6d2a10-bench", outcome.decision)
        best["encode"] = min(best["encode"], time.perf_counter() - started)
        started = time.perf_counter()
        for outcome in outcomes:
            webhook._observe(outcome, 0.001)
        best["observe"] = min(best["observe"], time.perf_counter() - started)
    micros = {stage: seconds / count * 1e6 for stage, seconds in best.items()}
    micros["decide"] = max(0.0, micros["review"] - micros["parse"] - micros["encode"])
    micros["total"] = micros["review"] + micros["observe"]
    return micros
