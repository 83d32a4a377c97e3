"""The stage clock: CPU per stage per request, the clock's own cost taken off."""

from __future__ import annotations

import pytest
from bench.webhook.breakdown import STAGES, StageClock


def test_stage_means_less_the_clock_cost() -> None:
    clock = StageClock()
    clock.clock_cost_ns = 100.0
    clock.add([0, 2_000, 7_000, 8_000, 19_000])  # parse 2 µs ... observe 11 µs
    clock.add([0, 4_000, 9_000, 10_000, 21_000])
    micros = clock.micros()
    assert [micros[stage] for stage in STAGES] == pytest.approx([2.9, 4.9, 0.9, 10.9])
    assert micros["total"] == pytest.approx(2.9 + 4.9 + 0.9 + 10.9)


def test_reset_forgets_and_nothing_measured_is_empty() -> None:
    clock = StageClock()
    clock.add([0, 1, 2, 3, 4])
    clock.reset()
    assert clock.micros() == {}
