"""The webhook table from measurements: ratios per concurrency, targets at 32, honest notes."""

from __future__ import annotations

from array import array

import pytest
from bench.webhook import population
from bench.webhook.loadgen import LoadResult
from bench.webhook.population import PopulationSpec
from bench.webhook.run import Measurement, WebhookProfile, build_table, combined, cost_table
from bench.webhook.servers import Ready

SPEC = PopulationSpec(deployments=40, pods=200, namespaces=4, samples_per_reason=2)
PREPARED = population.prepared_requests(SPEC, population.plan(SPEC))
STAGES = {"parse": 30.0, "decide": 50.0, "encode": 10.0, "observe": 60.0,
          "total": 150.0}  # fmt: skip
READY = Ready(8443, 50 << 20, 110 << 20, 20.0, {"pods": 200}, [])


def measurement(server: str, concurrency: int, rps: float, latency_ms: float,
                client_share: float = 0.3, server_share: float = 0.95,
                stages: dict[str, float] | None = None,
                round_: int = 0) -> Measurement:  # fmt: skip
    window = 8.0
    count = int(rps * window)
    latencies = array("d", [latency_ms / 1000] * count)
    result = LoadResult(completed=count, latencies=latencies.tobytes(), window=window,
                        client_cpu=client_share * window)  # fmt: skip
    return Measurement(server, concurrency, result, server_share * window, stages or {}, round_)


def table_of(measurements: list[Measurement], ready: Ready = READY) -> dict[str, object]:
    table = build_table(measurements, ready, PREPARED, WebhookProfile(population=SPEC), STAGES)
    return {"table": table, "rows": table.rows, "verdicts": table.verdicts,
            "notes": "\n".join(table.notes)}  # fmt: skip


def test_ratio_is_against_the_reference_at_the_same_concurrency() -> None:
    built = table_of([
        measurement("reference", 1, 4000, 0.2), measurement("webhook", 1, 2000, 0.4),
        measurement("reference", 32, 10000, 3.0), measurement("webhook", 32, 6000, 5.0),
    ])  # fmt: skip
    rows = built["rows"]
    assert isinstance(rows, list)
    assert [row["ratio"] for row in rows] == [None, 0.5, None, 0.6]
    assert rows[3]["p99"] == pytest.approx(5.0)
    assert rows[3]["client_us"] == pytest.approx(0.3 / 6000 * 1e6)


def test_targets_are_judged_at_concurrency_32_only() -> None:
    # at least the reference's rate, at most 0.85x its CPU per request (64 against 80 µs)
    met = table_of([measurement("reference", 32, 10000, 3.0, server_share=0.8),
                    measurement("webhook", 32, 11000, 4.0, server_share=0.7)])  # fmt: skip
    verdicts = met["verdicts"]
    assert isinstance(verdicts, list)
    assert [(v.where, v.met) for v in verdicts] == [("concurrency 32", True)] * 3
    assert "Targets missed" not in str(met["notes"])

    missed = table_of([measurement("reference", 32, 10000, 3.0),
                       measurement("webhook", 32, 3000, 12.0)])  # fmt: skip
    verdicts = missed["verdicts"]
    assert isinstance(verdicts, list)
    assert [v.met for v in verdicts] == [False, False, False]
    notes = str(missed["notes"])
    assert "Targets missed" in notes
    assert "Little's law" in notes
    assert "6,400 req/s" in notes
    assert "reference's own p99 in the same rounds was 3.0 ms" in notes
    assert "round by round, the webhook's p99 is 4.00x it" in notes


def test_a_baseline_server_gets_its_ratio_and_the_webhook_is_judged_against_it() -> None:
    table = table_of([measurement("reference", 32, 10000, 3.0, server_share=0.8),
                      measurement("webhook", 32, 11000, 4.0, server_share=0.7),
                      measurement("baseline", 32, 8000, 4.0, server_share=0.8)])  # fmt: skip
    rows = table["rows"]
    assert isinstance(rows, list)
    baseline = next(row for row in rows if row["server"] == "baseline")
    assert baseline["ratio"] == pytest.approx(0.8)  # of the reference's req/s
    assert baseline["cpu_us"] == pytest.approx(100.0)
    verdicts = table["verdicts"]
    assert isinstance(verdicts, list)
    against = verdicts[-1]
    assert "baseline" in against.target.describe()
    assert against.met and against.value == pytest.approx(63.6 / 100, abs=0.01)
    slower = table_of([measurement("reference", 32, 10000, 3.0, server_share=0.8),
                       measurement("webhook", 32, 11000, 4.0, server_share=0.7),
                       measurement("baseline", 32, 12000, 4.0, server_share=0.7)])  # fmt: skip
    verdicts = slower["verdicts"]
    assert isinstance(verdicts, list)
    assert not verdicts[-1].met  # 63.6 against 58.3 µs per request


def test_rounds_are_medians_and_ratios_pair_each_rounds_windows() -> None:
    # The machine slows down in round 1 for both servers: each round's pair keeps the ratio.
    rounds = [(10000, 8000, 3.0, 4.0, 0.8), (5000, 4000, 6.0, 9.0, 0.9),
              (8000, 6000, 3.5, 4.5, 0.8)]  # fmt: skip
    measurements = []
    for index, (ref_rps, web_rps, ref_p99, web_p99, web_share) in enumerate(rounds):
        measurements += [
            measurement("reference", 32, ref_rps, ref_p99, server_share=0.8, round_=index),
            measurement("webhook", 32, web_rps, web_p99, server_share=web_share, round_=index),
        ]
    built = table_of(measurements)
    rows = built["rows"]
    assert isinstance(rows, list)
    assert [row["server"] for row in rows] == ["reference", "webhook"]
    assert rows[0]["requests"] == (10000 + 5000 + 8000) * 8
    assert rows[0]["rps"] == 8000 and rows[1]["rps"] == 6000
    assert rows[1]["p99"] == pytest.approx(4.5)
    assert rows[1]["ratio"] == pytest.approx(0.8)  # per round: 0.8, 0.8, 0.75
    verdicts = built["verdicts"]
    assert isinstance(verdicts, list)
    throughput, cpu, p99 = verdicts
    assert throughput.value == pytest.approx(0.8)
    # CPU µs per request per round, webhook ÷ reference: 100/80, 225/160, 133.3/100
    assert cpu.value == pytest.approx(4 / 3)
    assert p99.value == pytest.approx(4.5) and p99.met
    notes = str(built["notes"])
    assert "4 rounds of one window per server" in notes  # the profile's
    assert "p99 per round at concurrency 32: the reference 3.0 to 6.0 ms" in notes
    assert "the webhook 4.0 to 9.0 ms" in notes
    assert "median 1.33" in notes  # 4/3, 9/6, 4.5/3.5


def test_a_saturated_client_is_called_out() -> None:
    built = table_of([measurement("reference", 32, 10000, 3.0, client_share=0.97),
                      measurement("webhook", 32, 6000, 5.0)])  # fmt: skip
    assert "reference at concurrency 32" in str(built["notes"])
    assert "lower bound" in str(built["notes"])


def test_errors_and_reason_mismatches_are_listed() -> None:
    failing = measurement("webhook", 32, 6000, 5.0)
    failing.result.errors["wrong decision"] = 3
    ready = Ready(8443, 0, 0, 1.0, {}, ["team-000/p (plain): dry-run, expected rollout-requested"])
    notes = str(table_of([measurement("reference", 32, 10000, 3.0), failing], ready)["notes"])
    assert "webhook at concurrency 32: 3 x wrong decision" in notes
    assert "1 requests were decided on an unexpected reason" in notes


def test_cost_table_puts_the_stages_beside_the_servers_cpu() -> None:
    measured = [
        measurement("reference", 32, 10000, 3.0, server_share=0.8),
        measurement("webhook", 32, 2500, 12.0, server_share=1.0),
    ]
    timed = measurement("webhook", 32, 2000, 15.0, server_share=0.47,
                        stages={**STAGES, "timing": 5.0})  # fmt: skip
    stack = measurement("webhook", 32, 5000, 6.0, server_share=0.45)  # 90 µs per request
    table = cost_table(measured, timed, stack)
    micros = [row["micros"] for row in table.rows]
    assert micros == pytest.approx(
        [30.0, 50.0, 10.0, 60.0, 150.0, 90.0, 5.0, 245.0, 235.0, 400.0, 80.0, 10.0]
    )
    [verdict] = table.verdicts
    assert verdict.met
    assert verdict.value == pytest.approx(10 / 235)


def test_combined_windows_sum_their_work_and_weigh_their_stages() -> None:
    first = measurement("webhook", 32, 1000, 10.0, server_share=0.5, stages={"parse": 10.0})
    second = measurement("webhook", 32, 3000, 10.0, server_share=0.9, stages={"parse": 30.0})
    both = combined([first, second])
    assert both.result.completed == 32000 and both.result.window == 16.0
    assert both.server_cpu == pytest.approx(0.5 * 8 + 0.9 * 8)
    assert both.stages["parse"] == pytest.approx((10 * 8000 + 30 * 24000) / 32000)
