"""Part 3's pure pieces: scaled timings and floors, the Ready-count step function, the
restart loop's node and owner logic, the manifests, and the tables."""

from __future__ import annotations

import pytest
from bench.drain import workload
from bench.drain.harness import Mode, RunResult, drain_bound, first_reaching
from bench.drain.poller import being_drained, owning_deployment
from bench.drain.run import DrainProfile, build_tables
from bench.drain.timings import DrainTimings, retry_interval_at
from hypothesis import example, given
from hypothesis import strategies as st

from kubesim.backoff import Backoff


@pytest.mark.parametrize(
    ("elapsed", "base", "cap", "expected"),
    [
        (0.0, 0.1, 10.0, 0.1),  # the first retry already comes after 0
        (1.0, 0.01, 1.0, 0.64),  # retries at .01 .03 .07 .15 .31 .63 1.27: the last waited .64
        (10.0, 0.1, 10.0, 6.4),  # 0.1 ... 12.7: the retry past 10 s waited 6.4 s
        (100.0, 0.1, 10.0, 10.0),  # capped
    ],
)
def test_karpenter_retry_interval_once_r_has_passed(elapsed: float, base: float, cap: float,
                                                    expected: float) -> None:  # fmt: skip
    assert retry_interval_at(elapsed, base, cap) == pytest.approx(expected)


@given(st.floats(min_value=0, max_value=1000), st.floats(min_value=0.001, max_value=1),
       st.floats(min_value=1, max_value=100))  # fmt: skip
def test_the_retry_interval_is_a_step_of_the_schedule_that_crosses_elapsed(
    elapsed: float, base: float, cap: float
) -> None:
    found = retry_interval_at(elapsed, base, cap)
    backoff = Backoff(base, cap)  # the Karpenter-style client's eviction retries
    delays = [backoff.next_delay() for _ in range(1, 80)]
    assert found in delays
    assert found <= cap


def test_timings_scale_every_upstream_duration() -> None:
    timings = DrainTimings(0.1)
    assert timings.readiness_delay == pytest.approx(1.0)
    assert timings.restart_period == pytest.approx(6.0)
    assert timings.blocked_window == pytest.approx(6.0)
    assert timings.parameters("kubectl")["retry_interval"] == pytest.approx(0.5)
    assert timings.parameters("cluster-autoscaler")["eviction_retry_time"] == pytest.approx(1.0)
    assert timings.parameters("karpenter")["eviction_max_delay"] == pytest.approx(1.0)
    assert timings.parameters("karpenter")["dedupe_timeout"] == pytest.approx(12.0)
    assert timings.floor("kubectl") == pytest.approx(1.5)
    assert timings.floor("cluster-autoscaler") == pytest.approx(2.0)
    assert timings.floor("karpenter") == pytest.approx(1.64)
    # within R + one retry interval + 2 s (unscaled) of the floor
    assert timings.target("kubectl") == pytest.approx(1.5 + 1.5 + 2.0)


@pytest.mark.parametrize("scale", [0.0, -0.1, 1.5])
def test_a_scale_outside_0_1_is_refused(scale: float) -> None:
    with pytest.raises(ValueError, match="scale"):
        DrainTimings(scale)


def test_unknown_clients_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown drain client"):
        DrainTimings().parameters("kops")


def test_a_bare_pdb_drain_is_cut_at_the_blocked_window() -> None:
    timings = DrainTimings(0.1)
    assert drain_bound(Mode.PDB, timings, "kubectl") == pytest.approx(6.0)
    assert drain_bound(Mode.CONTROLLER, timings, "kubectl") > timings.target("kubectl")


SAMPLES = [(0.0, 1), (5.0, 2), (6.0, 1), (9.0, 0), (10.0, 2)]


@pytest.mark.parametrize(
    ("level", "start", "end", "expected"),
    [
        (2, 1.0, 20.0, 4.0),
        (2, 5.0, 20.0, 0.0),  # already there at the start
        (2, 5.5, 20.0, 0.0),
        (2, 6.0, 20.0, 4.0),
        (2, 6.0, 9.5, None),  # not within the window
        (1, 9.0, 20.0, 1.0),
        (3, 0.0, 20.0, None),
    ],
)
def test_first_reaching(level: int, start: float, end: float, expected: float | None) -> None:
    assert first_reaching(SAMPLES, level, start, end) == expected


@example(samples=[(18.387029313499507, 1)], start=1.9282595192805179, level=1)
@given(st.lists(st.tuples(st.floats(0, 100), st.integers(0, 3)), max_size=12),
       st.floats(0, 100), st.integers(1, 3))  # fmt: skip
def test_first_reaching_is_the_first_moment_at_the_level(
    samples: list[tuple[float, int]], start: float, level: int
) -> None:
    found = first_reaching(samples, level, start, 200.0)

    def count_at(moment: float) -> int | None:
        current = None
        for at, count in sorted(samples, key=lambda s: s[0]):
            if at <= moment:
                current = count
        return current

    # The earliest moment in [start, 200] at which the step function stands at `level`: the
    # start itself or a sample time. Compared as `at - start`, exactly as computed, since
    # `start + (at - start)` need not give back `at` in floating point.
    moments = [start, *sorted(at for at, _ in samples if start < at <= 200.0)]
    reached = [m for m in moments if (count_at(m) or 0) >= level]
    if not reached:
        assert found is None
    else:
        assert found == (0.0 if reached[0] == start else reached[0] - start)


@pytest.mark.parametrize(
    ("spec", "drained"),
    [
        ({}, False),
        ({"unschedulable": True}, True),
        ({"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}, True),
        ({"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000"}]}, True),
        ({"taints": [{"key": "dedicated", "value": "db"}]}, False),
    ],
)
def test_nodes_being_drained(spec: dict[str, object], drained: bool) -> None:
    assert being_drained({"metadata": {"name": "n"}, "spec": spec}) is drained


def _owned(kind: str, name: str) -> dict[str, object]:
    return {"ownerReferences": [{"kind": kind, "name": name, "controller": True}]}


def test_owning_deployment_follows_pod_to_replicaset_to_deployment() -> None:
    replicasets = {
        ("shop", "web-5d9"): {"metadata": {"name": "web-5d9", **_owned("Deployment", "web")}},
        ("shop", "bare-rs"): {"metadata": {"name": "bare-rs"}},
    }

    def pod(owner: dict[str, object]) -> dict[str, object]:
        return {"metadata": {"name": "p", "namespace": "shop", **owner}}

    assert owning_deployment(pod(_owned("ReplicaSet", "web-5d9")), replicasets) == "web"  # type: ignore[arg-type]
    assert owning_deployment(pod(_owned("ReplicaSet", "bare-rs")), replicasets) is None  # type: ignore[arg-type]
    assert owning_deployment(pod(_owned("ReplicaSet", "gone")), replicasets) is None  # type: ignore[arg-type]
    assert owning_deployment(pod(_owned("StatefulSet", "db")), replicasets) is None  # type: ignore[arg-type]
    assert owning_deployment(pod({}), replicasets) is None  # type: ignore[arg-type]


def test_the_scenario_has_n_surgeable_deployments_and_optional_pdbs() -> None:
    scenario = workload.scenario("kubectl", 3, 1.0, {"retry_interval": 0.5}, with_pdb=True)
    kinds = [obj["kind"] for obj in scenario.manifests]
    assert kinds == ["Deployment"] * 3 + ["PodDisruptionBudget"] * 3
    deployment = scenario.manifests[0]
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert (
        deployment["spec"]["template"]["metadata"]["annotations"]["sim.kubesim.io/ready-delay"]
        == "1s"
    )
    assert scenario.measure.deployments == ("app-000", "app-001", "app-002")
    assert [node.name for node in scenario.nodes] == ["node-a", "node-b"]
    assert scenario.drains[0].parameters == {"retry_interval": 0.5}


def result(mode: Mode, duration: float | None, zero: float, surge: float | None = 0.5,
           client: str = "kubectl", count: int = 1,
           cpu: float | None = None) -> RunResult:  # fmt: skip
    return RunResult(client, mode.value, count, duration is not None, None, duration,
                     (zero,), (surge,), 3, cpu)  # fmt: skip


def test_tables_judge_graceful_drain_and_line_up_the_alternatives() -> None:
    profile = DrainProfile(clients=("kubectl",), counts=(1,), timings=DrainTimings(0.1))
    tables = build_tables([
        result(Mode.CONTROLLER, 1.7, 0.0, 1.1, cpu=0.8), result(Mode.NONE, 0.2, 1.05, cpu=0.3),
        result(Mode.PDB, None, 0.0), result(Mode.POLLING, 4.5, 0.0),
    ], profile)  # fmt: skip
    main, alternatives = tables
    assert main.rows[0]["drain"] == 1.7 and main.rows[0]["surge"] == 1.1
    assert main.rows[0]["cpu"] == 0.8  # the graceful-drain drain's, not another mode's
    assert main.rows[0]["after"] == pytest.approx(0.6)
    assert [(v.met, v.where) for v in main.verdicts] == [(True, "kubectl, N=1")] * 2
    row = alternatives.rows[0]
    assert row["pdb"] == "blocked (not drained after 6 s)"
    assert (row["none_zero"], row["none_down"], row["polling_drain"]) == (1.05, "1/1", 4.5)
    assert not any("surge column" in note for note in main.notes)


def test_a_slow_or_interrupted_drain_misses_its_targets_and_says_why() -> None:
    profile = DrainProfile(clients=("kubectl",), counts=(50,), timings=DrainTimings(0.1))
    tables = build_tables([result(Mode.CONTROLLER, 9.0, 0.4, 6.5, count=50)], profile)
    main = tables[0]
    assert [v.met for v in main.verdicts] == [False, False]
    assert any("N=50 the last replacement was Ready 6.50 s" in note for note in main.notes)
    assert tables[1].rows[0]["pdb"] == "not run"
