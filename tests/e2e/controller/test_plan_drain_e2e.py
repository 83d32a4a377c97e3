"""`graceful-drain plan` predicts, a real `kubectl drain` drains, every prediction is checked
(plan_check.py), on kubesim with graceful-drain installed from deploy/."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesim.sim import KubeSim

from .drain_cluster import drain_cluster
from .plan_check import DrainSubject, predict_drain_and_check

pytestmark = pytest.mark.e2e


async def test_plan_predicts_what_kubectl_drain_then_does_to_each_pod(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        await cluster.start_replica()
        subject = DrainSubject(
            sim.kubeconfig_path, "node-a", "node-b", cluster.recorder, cluster.admin,
        )  # fmt: skip
        await predict_drain_and_check(subject)
