"""The demo's timeline printed as the run happens (demo/live.py), on a scripted run: each
poll prints the entries observed since the last one, a progress line after a quiet spell,
and `finish` the rest, so the whole timeline is printed exactly once."""

from __future__ import annotations

import io
from dataclasses import replace

from graceful_drain.demo.live import LiveTimeline, progress_line
from graceful_drain.demo.timeline import RunRecord, format_entries, timeline
from tests.unit.demo.test_demo_output import POD
from tests.unit.demo.test_demo_output import WITH as FINAL


def observed(now: float) -> RunRecord:
    """FINAL as it was observed at `now`: only what had happened by then."""
    return replace(
        FINAL,
        finished=FINAL.finished if FINAL.finished and FINAL.finished <= now else None,
        settled=now,
        evictions=tuple(e for e in FINAL.evictions if e.at <= now),
        ready=tuple(sample for sample in FINAL.ready if sample[0] <= now),
        replicasets=tuple(rs for rs in FINAL.replicasets if rs[0] <= now),
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_entries_are_printed_as_they_are_observed_with_progress_while_waiting() -> None:
    out, clock = io.StringIO(), Clock()
    live = LiveTimeline(out, observed, clock, quiet_seconds=2.0)
    printed_by: dict[float, list[str]] = {}
    for now in (0.1, 0.5, 1.5, 2.6, 3.0, 4.0, 5.35):
        clock.now = now
        live.poll()
        printed_by[now] = out.getvalue().splitlines()
    live.finish(FINAL)

    assert printed_by[0.1] == ["   0.00s  drain of node-a started (kubectl-style client, with "
                               "graceful-drain); web has 1 Ready pod"]  # fmt: skip
    assert printed_by[0.5][1:] == [
        f"   0.20s  eviction of {POD} refused (429): held",
        "   0.30s  rollout started: new ReplicaSet web-new",
    ]
    assert printed_by[1.5] == printed_by[0.5]  # quiet, but not for long yet
    assert printed_by[2.6][3:] == [
        "   2.60s  ... drain of node-a running: web has 1 Ready pod; 1 eviction refused so far"
    ]
    assert printed_by[4.0][4:] == ["   3.90s  surge pod Ready: web has 2 Ready pods"]
    lines = out.getvalue().splitlines()
    assert [line for line in lines if "..." not in line] == format_entries(timeline(FINAL))


def test_finish_alone_prints_the_whole_timeline() -> None:
    out = io.StringIO()
    LiveTimeline(out, observed, Clock()).finish(FINAL)
    assert out.getvalue().splitlines() == format_entries(timeline(FINAL))


def test_progress_line_counts_refusals_and_ready_pods() -> None:
    assert progress_line(observed(1.0), 1.0) == (
        "   1.00s  ... drain of node-a running: web has 1 Ready pod; 1 eviction refused so far"
    )


def test_no_progress_line_once_the_drain_has_ended() -> None:
    """After "node drained" the run only waits for the workload to settle: the output ends
    with the outcome, not with "drain running"."""
    out, clock = io.StringIO(), Clock()
    live = LiveTimeline(out, lambda now: replace(observed(now), settled=now), clock,
                        quiet_seconds=2.0)  # fmt: skip
    assert FINAL.finished is not None
    for now in (0.1, 0.5, 2.6, FINAL.finished, FINAL.finished + 2.5, FINAL.finished + 5.0):
        clock.now = now
        live.poll()
    live.finish(FINAL)
    lines = out.getvalue().splitlines()
    drained = next(i for i, line in enumerate(lines) if "node node-a drained" in line)
    assert not any("..." in line for line in lines[drained:])
    assert any("..." in line for line in lines[:drained])  # it did say so while running
