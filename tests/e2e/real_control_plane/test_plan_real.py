"""`graceful-drain plan NODE` on the real control plane: predict, then a real `kubectl drain`,
then every prediction checked against what happened (tests/e2e/controller/plan_check.py, the
same check kubesim's run passes). The DaemonSet pod is the real DaemonSet controller's."""

from __future__ import annotations

import pytest

from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.e2e.controller.plan_check import DrainSubject, predict_drain_and_check

from .harness import Installation, admin_client

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]


async def test_plan_predicts_what_kubectl_drain_then_does_to_each_pod(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    replica = await installation.start_controller()
    admin = admin_client(real_cluster, "plan-check")
    try:
        subject = DrainSubject(
            real_cluster.kubeconfig_path, "node-a", "node-b", recorder, admin,
            namespace=namespace,
        )  # fmt: skip
        await predict_drain_and_check(subject)
    finally:
        replica.stop()
        await admin.close()
