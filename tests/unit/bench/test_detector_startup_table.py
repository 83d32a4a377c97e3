"""The detector's start-up table: ratios to bare Python, the verdict → exit gap, targets."""

from __future__ import annotations

from bench.detector.startup import (
    BARE,
    CLASSIFICATION,
    YAML_KUBECONFIG,
    Run,
    StartupSeries,
    build_table,
)


def runs(seconds: list[float], gap: float | None = None) -> list[Run]:
    return [Run(s, gap, 0, "") for s in seconds]


def test_ratios_and_gap_against_their_targets() -> None:
    table = build_table(
        [
            StartupSeries(BARE, runs([0.010, 0.010, 0.010])),
            StartupSeries("graceful-drain --version", runs([0.050, 0.050, 0.050])),
            StartupSeries(CLASSIFICATION, runs([0.120, 0.120, 0.120], gap=0.060)),
        ],
        "1.00 0.50 0.25",
    )
    bare, version, classification = table.rows
    assert bare["ratio"] == 1.0 and bare["gap_p50"] is None
    assert version["ratio"] == 5.0 and version["gap_p50"] is None
    assert classification["ratio"] == 12.0
    assert classification["gap_p99"] == 60.0
    assert [(v.where, v.met) for v in table.verdicts] == [
        ("graceful-drain --version", True),
        (CLASSIFICATION, False),  # 12x bare python
        (CLASSIFICATION, False),  # 60 ms from verdict to exit
    ]
    assert any("1.00 0.50 0.25" in note for note in table.notes)


def test_a_yaml_kubeconfig_is_shown_without_the_start_up_target() -> None:
    """A pod's start-up has the 8x target; the same classification with a YAML kubeconfig
    (a laptop's) is shown beside it, with the verdict → exit target only."""
    yaml_row = CLASSIFICATION + YAML_KUBECONFIG
    table = build_table(
        [
            StartupSeries(BARE, runs([0.010])),
            StartupSeries(CLASSIFICATION, runs([0.070], gap=0.002)),
            StartupSeries(yaml_row, runs([0.100], gap=0.002)),
        ],
        "1.00 0.50 0.25",
    )
    assert table.rows[2]["ratio"] == 10.0 and table.rows[2]["gap_p50"] == 2.0
    assert [(v.where, v.met) for v in table.verdicts] == [
        (CLASSIFICATION, True),  # 7x bare python
        (CLASSIFICATION, True),  # the gap
        (yaml_row, True),  # the gap only: no start-up target
    ]
