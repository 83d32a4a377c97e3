"""The collector's first threshold is raised while a KubeSim runs and put back after the last."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kubesim import python_gc
from kubesim.sim import KubeSim


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_the_last_release_puts_back_what_the_first_hold_found(
    default_thresholds: tuple[int, int, int],
) -> None:
    python_gc.hold()
    python_gc.hold()
    assert gc.get_threshold() == (python_gc.YOUNG_THRESHOLD, 10, 10)
    python_gc.release()
    assert gc.get_threshold() == (python_gc.YOUNG_THRESHOLD, 10, 10)  # one still holds
    python_gc.release()
    assert gc.get_threshold() == default_thresholds
    python_gc.release()  # one too many: nothing to put back
    assert gc.get_threshold() == default_thresholds


def test_a_higher_threshold_is_never_lowered(default_thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(100_000, 20, 30)
    python_gc.hold()
    assert gc.get_threshold() == (100_000, 20, 30)
    python_gc.release()
    assert gc.get_threshold() == (100_000, 20, 30)


async def test_a_running_kubesim_holds_the_raised_threshold(
    default_thresholds: tuple[int, int, int],
) -> None:
    async with KubeSim() as first:
        assert gc.get_threshold()[0] == python_gc.YOUNG_THRESHOLD
        async with KubeSim():
            pass
        assert gc.get_threshold()[0] == python_gc.YOUNG_THRESHOLD  # `first` still runs
        await first.stop()  # stopped twice (here and on leaving): released once
        assert gc.get_threshold() == default_thresholds
    assert gc.get_threshold() == default_thresholds
