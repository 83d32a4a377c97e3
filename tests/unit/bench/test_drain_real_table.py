"""Part 3 on the real control plane, its pure pieces: the table beside kubesim, whose the lag
is, the webhook registered by URL, and the controller's decision count read from /metrics."""

from __future__ import annotations

from typing import Any

import pytest
from bench.drain.compare import RealRun, build_comparison, lag_attribution, slowest_surge
from bench.drain.controller import ControllerReady, webhook_configuration_by_url
from bench.drain.harness import Mode, RunResult
from bench.drain.real import decisions_total, series_namespace
from bench.drain.timings import DrainTimings

TIMINGS = DrainTimings(0.1)  # R = 1 s: a surge pod Ready by 3 s (R + 2 s) does not lag


def result(mode: Mode, client: str, count: int, *, duration: float | None = 2.0,
           surge: float | None = 1.2, zero: float = 0.0) -> RunResult:  # fmt: skip
    return RunResult(client, mode.value, count, duration is not None, None, duration,
                     (zero,) * count, (surge,) * count, 1)  # fmt: skip


def plane(count: int, surge: float, outage: float, clients: tuple[str, ...] = ("kubectl",)
          ) -> tuple[RunResult, ...]:  # fmt: skip
    return tuple(
        r
        for client in clients
        for r in (
            result(Mode.CONTROLLER, client, count, surge=surge),
            result(Mode.NONE, client, count, duration=0.1, zero=outage),
        )
    )


@pytest.mark.parametrize(
    ("kubesim_surge", "real_surge", "expected"),
    [
        (6.5, 1.3, "At N=50 the lag is kubesim's"),
        (6.5, 7.0, "At N=50 the lag is not kubesim's"),
        (6.5, 6.5, "At N=50 the lag is not kubesim's"),
        (6.5, 4.0, "At N=50 the lag is partly kubesim's"),
        (1.4, 4.0, "At N=50 only the real control plane lags"),
        (1.4, 1.3, "At N=50 neither control plane lags"),
        (3.0, 3.0, "At N=50 neither control plane lags"),  # R + 2 s is still in time
    ],
)
def test_the_lag_is_attributed_from_the_last_surge_pod_on_each_plane(
    kubesim_surge: float, real_surge: float, expected: str
) -> None:
    real = RealRun(plane(50, real_surge, 1.1))
    text = lag_attribution(list(plane(50, kubesim_surge, 6.0)), real, 50, TIMINGS)
    assert text.startswith(expected)
    assert f"{real_surge:.2f} s after the drain began on the real control plane" in text
    assert f"{kubesim_surge:.2f} s on kubesim" in text
    assert "R + 2 s = 3.00 s" in text
    assert "up to 1.10 s on the real control plane and 6.00 s on kubesim" in text


def test_the_lag_is_not_attributed_without_the_real_part_or_its_figures() -> None:
    kubesim = list(plane(50, 6.5, 6.0))
    skipped = RealRun(skipped="go is not on PATH")
    assert lag_attribution(kubesim, skipped, 50, TIMINGS) == (
        "Whose the lag at N=50 is cannot be said from this run: go is not on PATH."
    )
    never_surged = RealRun(plane(50, 1.0, 1.0)[1:])  # only the unprotected drain
    assert "cannot be said: a control plane has no figure" in lag_attribution(
        kubesim, never_surged, 50, TIMINGS
    )


def test_the_slowest_surge_is_the_latest_client_at_that_n() -> None:
    results = [
        *plane(50, 2.0, 1.0, ("kubectl",)),
        *plane(50, 5.0, 1.0, ("karpenter",)),
        *plane(10, 9.0, 1.0, ("cluster-autoscaler",)),  # another N
        result(Mode.CONTROLLER, "cluster-autoscaler", 50, surge=None),  # never surged
    ]
    assert slowest_surge(results, 50) == ("karpenter", 5.0)
    assert slowest_surge(results, 1) is None


def test_the_table_puts_each_planes_row_side_by_side() -> None:
    kubesim = [*plane(1, 1.2, 1.1), *plane(50, 6.5, 6.2)]
    real = RealRun(plane(1, 1.15, 1.12), start_seconds=11.0, seconds=300.0)
    table = build_comparison(kubesim, real, ("kubectl",), (1, 50), TIMINGS)
    cells = [(r["count"], r["plane"], r["surge"], r["none_zero"], r["none_down"])
             for r in table.rows]  # fmt: skip
    assert cells == [
        (1, "kubesim", 1.2, 1.1, "1/1"),
        (1, "real", 1.15, 1.12, "1/1"),
        (50, "kubesim", 6.5, 6.2, "50/50"),
        (50, "real", None, None, None),  # not run on the real plane: blank cells
    ]
    assert table.rows[0]["drain"] == 2.0 and table.rows[0]["none_drain"] == 0.1
    assert any("took 300 s" in note and "sync: 11 s" in note for note in table.notes)
    assert table.notes[-1].startswith("Whose the lag at N=50 is cannot be said")


def test_a_skipped_real_part_leaves_kubesims_rows_and_says_why() -> None:
    real = RealRun(skipped="the real control plane's binaries are not built")
    table = build_comparison(list(plane(1, 1.2, 1.1)), real, ("kubectl",), (1,), TIMINGS)
    assert [row["plane"] for row in table.rows] == ["kubesim"]
    assert table.notes[0] == (
        "Real control plane: not run — the real control plane's binaries are not built."
    )
    assert table.verdicts == []  # the targets are judged on kubesim's table, not here


def test_the_webhook_is_registered_by_url_on_the_controllers_port() -> None:
    manifest: Any = webhook_configuration_by_url(ControllerReady(8443, b"PEM", 9090))
    [hook] = manifest["webhooks"]
    assert hook["clientConfig"]["url"] == "https://127.0.0.1:8443/validate-eviction"
    assert "service" not in hook["clientConfig"]
    assert hook["clientConfig"]["caBundle"] == "UEVN"  # base64 of the CA
    assert hook["failurePolicy"] == "Ignore"  # the shipped configuration, unchanged otherwise


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0.0),
        ("# HELP graceful_drain_decisions_total x\n# TYPE graceful_drain_decisions_total counter\n",
         0.0),
        ('graceful_drain_decisions_total{allowed="true",reason="dry-run"} 2.0\n'
         'graceful_drain_decisions_total{allowed="false",reason="rollout-started"} 3.0\n'
         'graceful_drain_decisions_created{allowed="true",reason="dry-run"} 1.7e9\n'
         "graceful_drain_rollouts_started_total 3.0\n", 5.0),
    ],
)  # fmt: skip
def test_decisions_are_counted_from_the_metrics_text(text: str, expected: float) -> None:
    assert decisions_total(text) == expected


def test_each_series_has_a_namespace_of_its_own() -> None:
    assert series_namespace("cluster-autoscaler", 50) == "shop-cluster-autoscaler-50"
