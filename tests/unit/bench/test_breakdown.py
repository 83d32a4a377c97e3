"""The stage clock: CPU per stage per request, the clock's own cost taken off."""

from __future__ import annotations

import pytest
from bench.webhook.breakdown import STAGES, StageClock


def test_stage_means_less_the_clock_cost() -> None:
    clock = StageClock()
    clock.clock_cost_ns = 100.0
    clock.add([0, 2_000, 7_000, 8_000])  # parse 2 µs, decide 5 µs, encode 1 µs
    clock.add([0, 4_000, 9_000, 10_000])
    clock.observed(22_000)  # both answers observed in one loop turn: 11 µs each
    micros = clock.micros()
    assert [micros[stage] for stage in STAGES] == pytest.approx([2.9, 4.9, 0.9, 10.95])
    assert micros["total"] == pytest.approx(2.9 + 4.9 + 0.9 + 10.95)


def test_reset_forgets_and_nothing_measured_is_empty() -> None:
    clock = StageClock()
    clock.add([0, 1, 2, 3])
    clock.observed(1)
    clock.reset()
    assert clock.micros() == {}
