"""A newcomer's first kubectl session (tests/e2e/kubesim/newcomer.py: create deployment,
create job, run, expose, scale, rollout restart, rollout status, get events, describe pod)
on `kubesim serve` alone and on the real control plane: the same outcome, step by step."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import pytest

from realcluster.cluster import RealCluster
from tests.e2e.kubesim.newcomer import run_session
from tests.e2e.real_control_plane.harness import kubectl

from .servers import kubesim_kubeconfig, kubesim_serve

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]


async def test_newcomer_session_has_the_same_outcome_on_both(
    tmp_path: Path, real_cluster: RealCluster
) -> None:
    namespace = f"newcomer-{secrets.token_hex(3)}"
    real = real_cluster.kubeconfig_path
    with kubesim_serve(tmp_path, ()):
        sim = kubesim_kubeconfig(tmp_path)
        for kubeconfig in (sim, real):
            await kubectl(kubeconfig, "create", "namespace", namespace)
        try:
            # The serviceaccount controllers make `default` in a new namespace soon after it,
            # and kube-apiserver admits no pod before it exists (kubesim admits one anyway:
            # docs/kubesim-fidelity.md).
            for kubeconfig in (sim, real):
                await kubectl(kubeconfig, "wait", "--for=create", "serviceaccount/default",
                              "-n", namespace, "--timeout=60s")  # fmt: skip
            on_kubesim, on_real = await asyncio.gather(
                run_session(sim, namespace), run_session(real, namespace)
            )
        finally:
            # Nothing outlives the test on the shared control plane: the session's bare pod
            # (`kubectl run`) would make every later `kubectl drain` of its node refuse to run.
            await kubectl(real, "delete", "namespace", namespace, "--timeout=60s", check=False)
    assert [step.code for step in on_real] == [0] * len(on_real), "\n".join(map(str, on_real))
    # What is compared is what the newcomer reads (see newcomer.outcome):
    assert on_real[6].outcome == ('deployment "web" successfully rolled out',)
    assert on_real[7].outcome == ("serviceaccount/default",)
    assert "Normal ScalingReplicaSet Deployment" in on_real[8].outcome
    assert {"Name", "Node", "Containers", "Events"} <= set(on_real[9].outcome)
    for sim_step, real_step in zip(on_kubesim, on_real, strict=True):
        assert (sim_step.code, sim_step.outcome) == (real_step.code, real_step.outcome), (
            f"kubesim: {sim_step}\nkube-apiserver: {real_step}"
        )
