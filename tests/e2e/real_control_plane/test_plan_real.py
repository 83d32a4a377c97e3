"""`graceful-drain plan NODE` on the real control plane: predict, then a real `kubectl drain`,
then every prediction checked against what happened (tests/e2e/controller/plan_check.py, the
same check kubesim's run passes), on a node of 21 mixed pods. The DaemonSet, Job and
StatefulSet pods are the real controllers'.

And `status` during a held drain whose replacement cannot schedule, then with the webhook
down while registered: `plan` and `status` say so first, and the drain goes through."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.e2e.controller.plan_check import (
    GRACEFUL_DRAIN,
    DrainSubject,
    Run,
    predict_drain_and_check,
)
from tests.unit.inspection.documented_schema import problems

from .harness import (
    BOUND,
    Installation,
    Obj,
    admin_client,
    create_ready_web,
    drain,
    kubectl,
    pods,
    watch_objects,
)

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


async def graceful_drain(kubeconfig: Path, *args: str) -> Run:
    env = {"KUBECONFIG": str(kubeconfig), "PATH": os.environ.get("PATH", "")}

    def call() -> subprocess.CompletedProcess[str]:
        return subprocess.run([GRACEFUL_DRAIN, *args], capture_output=True, text=True, env=env,
                              timeout=BOUND, check=False)  # fmt: skip

    done = await asyncio.to_thread(call)
    return Run(done.returncode, done.stdout, done.stderr)


def unschedulable(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in conditions)  # fmt: skip


async def test_status_shows_a_pending_replacement_then_plan_and_status_lead_with_a_down_webhook(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    kubeconfig = real_cluster.kubeconfig_path
    replica = await installation.start_controller()
    stopped = False
    try:
        await create_ready_web(real_cluster, recorder, namespace)
        [old] = await pods(real_cluster, namespace)
        node = old["spec"]["nodeName"]
        for other in real_cluster.node_names:  # the replacement has nowhere to go
            if other != node:
                await kubectl(kubeconfig, "cordon", other)
        draining = asyncio.create_task(drain(real_cluster, recorder, node))
        await watch_objects(real_cluster, "v1", "pods", "Pod", namespace,
                            lambda items: any(map(unschedulable, items)))  # fmt: skip

        held, held_table = await asyncio.gather(
            graceful_drain(kubeconfig, "status", "--json"), graceful_drain(kubeconfig, "status")
        )
        replica.stop()  # the webhook stays registered; its url now answers nothing
        stopped = True
        plan, plan_json, plan_yaml, down = await asyncio.gather(
            graceful_drain(kubeconfig, "plan", node),
            graceful_drain(kubeconfig, "plan", node, "--json"),
            graceful_drain(kubeconfig, "plan", node, "-o", "yaml"),
            graceful_drain(kubeconfig, "status"),
        )
        drained = await draining

        assert held.code == 0, held.stderr + held.stdout
        document = json.loads(held.stdout)
        assert problems(document, "status") == []
        assert document["webhook"]["protection"] == "protected", document["webhook"]
        [web] = [h for h in document["held"] if h["namespace"] == namespace]
        assert web["pod"] == old["metadata"]["name"] and web["nodes"] == [node]
        assert web["rollout"]["ready"] == 1  # the Deployment counts the old pod...
        assert web["replacementsReady"] == 0  # ...status does not
        [replacement] = web["replacements"]
        assert (replacement["phase"], replacement["node"], replacement["ready"]) == (
            "Pending", None, False,
        )  # fmt: skip
        assert replacement["reason"] == "Unschedulable"
        assert "unschedulable" in replacement["message"], replacement
        assert held_table.stdout.startswith("Webhook: ok: "), held_table.stdout
        line = (f"  {namespace}/web replacement {replacement['name']}: Pending, not scheduled, "
                f"not Ready (Unschedulable: ")  # fmt: skip
        assert line in held_table.stdout, held_table.stdout

        address = f"127.0.0.1:{installation.service.port}"
        assert plan.code == 4, plan.stderr + plan.stdout
        verdict = plan.stdout.splitlines()[-1]
        assert verdict.startswith(
            "Verdict: unprotected: webhook graceful-drain does not protect evictions ("
        ), verdict
        assert "failurePolicy Ignore: the API server lets every eviction through" in verdict
        assert address in verdict, verdict
        assert json.loads(plan_json.stdout)["verdict"] == "unprotected"
        as_yaml = yaml.safe_load(plan_yaml.stdout)
        assert (plan_yaml.code, as_yaml["verdict"]) == (4, "unprotected"), plan_yaml.stderr
        assert problems(as_yaml, "plan") == []
        assert down.code == 1, down.stderr + down.stdout
        assert down.stdout.startswith("Webhook: UNPROTECTED: failurePolicy Ignore"), down.stdout
        # What they said: the drain's next retry is let through unchecked.
        assert drained.code == 0, drained.stderr
    finally:
        if not stopped:
            replica.stop()
