"""The demo's cluster is the seed's eviction dance (scenarios/eviction-dance.yaml)."""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from graceful_drain.demo import workload
from kubesim.cluster.behaviour import READY_DELAY, PodBehaviour

REPO = Path(__file__).resolve().parents[3]


def scenario() -> dict[str, Any]:
    text = (REPO / "scenarios" / "eviction-dance.yaml").read_text()
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def without_timings(deployment: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(deployment)
    stripped["spec"]["template"]["metadata"].pop("annotations")
    return stripped


def test_the_deployment_is_the_scenarios_but_for_its_timings() -> None:
    [shipped] = [m for m in scenario()["manifests"] if m["kind"] == "Deployment"]
    ours = workload.deployment(timedelta(seconds=3))
    assert without_timings(ours) == without_timings(shipped)
    annotations = ours["spec"]["template"]["metadata"]["annotations"]
    assert set(annotations) == set(shipped["spec"]["template"]["metadata"]["annotations"])


def test_the_nodes_are_the_scenarios() -> None:
    shipped = {node["name"]: node for node in scenario()["nodes"]}
    ours = workload.nodes()
    assert set(ours) == set(shipped) == {workload.DRAINED_NODE, workload.SPARE_NODE}
    for name, shape in ours.items():
        assert dict(shape.labels) == shipped[name]["labels"]
        assert (shape.cpu, shape.memory) == (
            shipped[name]["capacity"]["cpu"], shipped[name]["capacity"]["memory"],
        )  # fmt: skip


@pytest.mark.parametrize(("delay", "seconds"), [(timedelta(seconds=3), 3.0),
                                                (timedelta(milliseconds=250), 0.25),
                                                (timedelta(0), 0.0)])  # fmt: skip
def test_the_ready_delay_is_what_the_simulated_kubelet_reads(delay: timedelta,
                                                             seconds: float) -> None:  # fmt: skip
    template = workload.deployment(delay)["spec"]["template"]
    assert template["metadata"]["annotations"][READY_DELAY] == workload.seconds_text(seconds)
    assert PodBehaviour.from_pod(template).ready_delay == seconds
