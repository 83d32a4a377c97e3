"""The detector table: runs within the deadline, verdicts counted, unexpected ones called out."""

from __future__ import annotations

from bench.detector.detect_proc import Detection
from bench.detector.run import EXPECTED, FALLBACK, Series, build_table


def detections(seconds: list[float], budget: float, verdict: tuple[str, str]) -> list[Detection]:
    return [Detection(s, budget, *verdict) for s in seconds]


def test_runs_past_the_deadline_miss_the_target() -> None:
    table = build_table([
        Series("library", "healthy", 5.0, detections([0.02, 0.03, 0.04], 5.0, EXPECTED),
               EXPECTED),
        Series("library", "hanging", 1.0, detections([0.98, 1.02], 1.0, FALLBACK), FALLBACK),
    ])  # fmt: skip
    healthy, hanging = table.rows
    assert (healthy["within"], healthy["p50"], healthy["max"]) == ("3/3", 30.0, 40.0)
    assert healthy["verdicts"] == "voluntary / drain_gracefully x3"
    assert hanging["within"] == "1/2"
    assert [(v.where, v.met, v.value) for v in table.verdicts] == [
        ("library, healthy API", True, 0),
        ("library, hanging API", False, 1),
    ]


def test_an_unexpected_verdict_is_noted() -> None:
    found = detections([0.02], 5.0, EXPECTED) + detections([0.03], 5.0, FALLBACK)
    table = build_table([Series("CLI process", "healthy", 5.0, found, EXPECTED)])
    assert table.rows[0]["verdicts"] == (
        "indeterminate / shed_load_and_exit_fast x1, voluntary / drain_gracefully x1"
    )
    assert any("1 verdicts other than voluntary / drain_gracefully" in n for n in table.notes)
