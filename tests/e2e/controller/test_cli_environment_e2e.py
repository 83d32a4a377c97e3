"""`graceful-drain status` configured by the controller's environment alone, as a pod running
it beside the controller would be: GRACEFUL_DRAIN_KUBECONFIG reaches the cluster (over a
$KUBECONFIG that does not exist), and the controller's namespace, rolloutTimeout and
enabled annotation come from their GRACEFUL_DRAIN_* variables; a flag still wins."""

from __future__ import annotations

import json
import os

from kubesim.sim import KubeSim
from tests.e2e.cli import run_cli

BOUND = 60.0
CONTROLLER_ENVIRONMENT = {
    "GRACEFUL_DRAIN_CONTROLLER_NAMESPACE": "ops",
    "GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": "7m",
    "GRACEFUL_DRAIN_ENABLED_ANNOTATION": "example.com/protect",
}


async def test_status_reads_the_controllers_variables_and_a_flag_wins(sim: KubeSim) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(sim.kubeconfig_path.parent),
           "KUBECONFIG": "/nonexistent", **CONTROLLER_ENVIRONMENT,
           "GRACEFUL_DRAIN_KUBECONFIG": str(sim.kubeconfig_path)}  # fmt: skip
    code, out, err = await run_cli("status", "--json", env=env, bound=BOUND)
    flagged = await run_cli("status", "--json", "--rollout-timeout", "3m", env=env, bound=BOUND)
    elsewhere = await run_cli("status", "--kubeconfig", "/from-flag", env=env, bound=BOUND)

    assert code == 1, err  # degraded: no webhook registered in this empty cluster
    controller = json.loads(out)["controller"]
    assert controller["rolloutTimeoutSeconds"] == 7 * 60
    assert controller["enabledAnnotation"] == "example.com/protect"
    assert "ops/graceful-drain" in controller["configSource"]
    reads = [r for r in sim.audit.records() if r.resource == "deployments"]
    assert any(r.namespace == "ops" for r in reads), [(r.verb, r.namespace) for r in reads]
    assert json.loads(flagged[1])["controller"]["rolloutTimeoutSeconds"] == 3 * 60
    assert elsewhere[0] == 3
    assert b"/from-flag" in elsewhere[2] and b"/nonexistent" not in elsewhere[2]
