"""Where one admission's CPU time goes inside the webhook, measured under load.

The bench's webhook server also answers on `TIMED_PATH`, with `timed_handler` over its own
`TimedWebhook`: the same steps as `EvictionWebhook.answer` (parse, decide, encode), the
thread's CPU clock read between them, and the observation (log line, metrics) timed where the
webhook runs it, in the next turn of the event loop for all the answers of a turn. After the
main measurements the load generator sends more windows at concurrency 32 there, so each stage
is timed interleaved with TLS, HTTP and the event loop, with the caches as they are under load —
not in a warm tight loop, which understates the same code about twice. The clock's own cost is
measured first and taken off.

What the stages leave out — TLS, HTTP parsing, the connection guard, the response write, the
event loop — is measured on `CANNED_PATH`: the reference's canned answer served by the webhook's
own process, server and guard, in windows alternating with the timed ones. The cost table adds
the stages, that stack and the timing's own cost, and checks the sum against the CPU the
webhook process actually used per request in the timed windows; the reference server's whole
request (on aiohttp) is shown beside it.
"""

from __future__ import annotations

import time
from typing import Any

from graceful_drain.controller.decision.table import unexpected_error
from graceful_drain.controller.serving.admission import (
    MalformedReview,
    answer_malformed,
    encode_review_response,
    parse_review,
)
from graceful_drain.controller.serving.http import Arrival, BodyHandler
from graceful_drain.controller.serving.webhook import (
    NOT_DECIDED,
    WEBHOOK_PATH,
    EvictionWebhook,
    Outcome,
)

TIMED_PATH = WEBHOOK_PATH + "-timed"
CANNED_PATH = WEBHOOK_PATH + "-canned"
STAGES = ("parse", "decide", "encode", "observe")
ANSWER_STAGES = STAGES[:-1]  # timed in the handler; "observe" in the loop turn after
_CALIBRATION_READS = 20_000


def _clock_cost_ns() -> float:
    """Nanoseconds one thread_time_ns() read adds between two stage boundaries."""
    started = time.thread_time_ns()
    for _ in range(_CALIBRATION_READS):
        time.thread_time_ns()
    return (time.thread_time_ns() - started) / _CALIBRATION_READS


class StageClock:
    """Thread CPU nanoseconds per stage, summed over the requests answered since reset()."""

    def __init__(self) -> None:
        self.clock_cost_ns = _clock_cost_ns()
        self.totals = dict.fromkeys(STAGES, 0)
        self.requests = 0
        self.turns = 0  # observations of a loop turn's answers
        self.timing_ns = self._timing_cost_ns()

    def _timing_cost_ns(self) -> float:
        """Nanoseconds per request the timing itself adds to the process: the clock reads
        between the answer's stages and this bookkeeping, as timed_handler does them (the
        observation's two reads are per loop turn, not per request, and left out)."""
        now = time.thread_time_ns
        started = now()
        for _ in range(_CALIBRATION_READS // len(STAGES)):
            marks = [now()]
            for _stage in ANSWER_STAGES:
                marks.append(now())
            self.add(marks)
        cost = (now() - started) / (_CALIBRATION_READS // len(STAGES))
        self.reset()
        return cost

    def reset(self) -> None:
        self.totals = dict.fromkeys(STAGES, 0)
        self.requests = 0
        self.turns = 0

    def add(self, marks: list[int]) -> None:
        """One answer's clock readings around ANSWER_STAGES."""
        for stage, begin, end in zip(ANSWER_STAGES, marks, marks[1:], strict=False):
            self.totals[stage] += end - begin
        self.requests += 1

    def observed(self, nanoseconds: int) -> None:
        """The observation of one loop turn's answers took `nanoseconds`."""
        self.totals["observe"] += nanoseconds
        self.turns += 1

    def micros(self) -> dict[str, float]:
        """µs per request for each stage, "total" for the webhook's own ones (all but the
        read), and "timing" for the timing's own cost; empty before any request."""
        if self.requests == 0:
            return {}
        cost = self.clock_cost_ns
        readings = {stage: self.requests for stage in ANSWER_STAGES} | {"observe": self.turns}
        micros = {
            stage: max(0.0, (total - readings[stage] * cost) / self.requests) / 1000
            for stage, total in self.totals.items()
        }
        micros["total"] = sum(value for stage, value in micros.items() if stage in STAGES)
        micros["timing"] = self.timing_ns / 1000
        return micros


class TimedWebhook(EvictionWebhook):
    """The webhook of TIMED_PATH: its observation of each loop turn's answers is timed as the
    "observe" stage of `stages`."""

    def __init__(self, *args: Any, stages: StageClock, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stages = stages

    def _observe_gathered(self) -> None:
        started = time.thread_time_ns()
        super()._observe_gathered()
        self.stages.observed(time.thread_time_ns() - started)


def timed_handler(webhook: TimedWebhook) -> BodyHandler:
    """EvictionWebhook.answer, step by step, with a CPU clock read between the steps."""
    now = time.thread_time_ns
    clock = webhook.stages

    async def answer(body: bytes | None, arrival: Arrival) -> bytes:
        started = time.perf_counter()
        marks = [now()]
        parsed = parse_review(b"" if body is None else body)
        marks.append(now())
        if isinstance(parsed, MalformedReview):
            outcome = Outcome(parsed.decision())
            marks.append(now())
            payload = answer_malformed(parsed)
        else:
            outcome = Outcome(NOT_DECIDED, request=parsed)
            try:
                await webhook._decide(parsed, outcome, arrival)
            except Exception as error:
                outcome.decision = unexpected_error(parsed, error)
                outcome.error = error
            marks.append(now())
            payload = encode_review_response(parsed.uid, outcome.decision)
        marks.append(now())
        clock.add(marks)
        webhook._observe_later(outcome, time.perf_counter() - started)
        return payload

    return answer
