"""`graceful-drain status` during a held drain, and `kubectl graceful-drain` as a kubectl plugin
run by a person bound only to deploy/cli/'s read-only ClusterRole (kubesim enforces RBAC)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.kube.timefmt import format_go_duration, parse_go_duration
from kubesim.sim import KubeSim
from tests.e2e.watching import annotations_of
from tests.unit.inspection.documented_schema import problems

from .drain_cluster import drain_cluster
from .drain_workloads import TemplateRestartBlocker
from .installed import BOUND, REPO
from .plan_check import Run

pytestmark = pytest.mark.e2e

VENV_BIN = Path(sys.executable).parent
VIEWER_ROLE = "graceful-drain-viewer"  # deploy/cli/clusterrole.yaml
# The webhook's 429 message (decision/table.py `_waiting_message`), as kubectl drain prints it.
HELD = re.compile(
    r"waiting for a replacement of Deployment (?P<deployment>\S+) to become Ready on another "
    r"node \(rollout requested (?P<waited>\S+) ago, gives up after (?P<timeout>\S+)\)"
)


def without_time(document: dict[str, Any]) -> dict[str, Any]:
    """A document less when it was made and when the Lease was last renewed."""
    kept = {key: value for key, value in document.items() if key != "generatedAt"}
    if "leader" in kept:
        kept["leader"] = {k: v for k, v in kept["leader"].items() if k != "renewedAt"}
    return kept


async def run(command: list[str], kubeconfig: Path) -> Run:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig),
           "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    env.pop("NO_COLOR", None)
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, env=env, timeout=BOUND,
        check=False,
    )  # fmt: skip
    return Run(done.returncode, done.stdout, done.stderr)


async def test_status_during_a_held_drain_shows_what_the_webhooks_429_says(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        TemplateRestartBlocker(sim)  # the rollout never starts: the drain stays held
        replica = await cluster.start_replica()
        await cluster.create_web()

        drained = await cluster.kubectl_drain("node-a", "--timeout=10s")
        stamp = annotations_of(await cluster.deployment())[RESTARTED_AT_ANNOTATION]
        status = await run(
            ["graceful-drain", "status", "--json",
             f"--webhook-address=127.0.0.1:{replica.webhook_port}"],
            sim.kubeconfig_path,
        )  # fmt: skip
        table = await run(["graceful-drain", "status"], sim.kubeconfig_path)

        assert drained.code != 0, drained.stdout  # held until kubectl's own timeout
        told = [match.groupdict() for match in HELD.finditer(drained.stderr)]
        assert told, drained.stderr
        assert status.code == 0, status.stderr
        document = json.loads(status.stdout)
        assert problems(document, "status") == []
        [held] = document["held"]
        assert (held["namespace"], held["name"], held["restartedAt"]) == ("default", "web", stamp)
        assert held["nodes"] == ["node-a"]
        assert held["rollout"] == {"replicas": 1, "updated": 1, "ready": 1, "available": 1,
                                   "complete": True}  # fmt: skip
        says = HELD.search(held["decision"]["message"])
        assert says is not None, held["decision"]
        # The same message the drain was given, at the moment status looked.
        assert says["deployment"] == told[-1]["deployment"] == "default/web"
        assert says["timeout"] == told[-1]["timeout"] == "10m0s"
        assert says["waited"] == held["waited"]
        assert held["waited"] == format_go_duration(timedelta(seconds=held["waitedSeconds"]))
        assert parse_go_duration(held["waited"]) >= parse_go_duration(told[-1]["waited"])
        assert held["timeLeft"] == format_go_duration(timedelta(seconds=held["timeLeftSeconds"]))
        assert held["waitedSeconds"] + held["timeLeftSeconds"] == pytest.approx(600)
        assert document["webhook"] | {"detail": ""} == {
            "configuration": "graceful-drain", "registered": True, "caBundle": "valid",
            "certificate": "verified", "endpoint": f"127.0.0.1:{replica.webhook_port}",
            "serverName": "graceful-drain-webhook.graceful-drain.svc", "healthy": True,
            "detail": "", "protection": "protected", "failurePolicy": "Ignore",
            "answer": "answered", "problem": None, "consequence": "",
        }  # fmt: skip
        assert document["leader"]["held"] is True
        assert document["leader"]["holder"] == "graceful-drain-0"
        assert table.code == 0, table.stderr
        # Without an address the Service is judged by its endpoints, which kubesim does not
        # serve: not verified, and never "ok".
        assert table.stdout.startswith("Webhook: not verified: graceful-drain: "), table.stdout
        [row] = [line for line in table.stdout.splitlines() if line.startswith("default/web ")]
        assert "node-a" in row and "waiting for a replacement" in row
        assert "\033[" not in table.stdout  # no colour when not on a terminal


async def test_a_registered_webhook_whose_replica_stopped_is_unprotected_and_the_drain_says_so(
    sim: KubeSim, tmp_path: Path
) -> None:
    """The Service still points at the stopped replica's port: the API server's call fails,
    failurePolicy Ignore lets the eviction through. plan and status say so first."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()
        await cluster.create_web()
        address = f"--webhook-address=127.0.0.1:{replica.webhook_port}"
        await replica.stop()

        plan, table, status = await asyncio.gather(
            run(["graceful-drain", "plan", "node-a", "--json", address], sim.kubeconfig_path),
            run(["graceful-drain", "plan", "node-a", address], sim.kubeconfig_path),
            run(["graceful-drain", "status", address], sim.kubeconfig_path),
        )
        drained = await cluster.kubectl_drain("node-a", "--timeout=30s")

        assert plan.code == 4, plan.stderr
        document = json.loads(plan.stdout)
        assert problems(document, "plan") == []
        assert (document["verdict"], document["webhook"]["protection"]) == (
            "unprotected", "unprotected",
        )  # fmt: skip
        [web] = [p for p in document["pods"] if p["workload"] == "Deployment/web"]
        assert (web["outcome"], web["outage"], web["reason"]) == (
            "evicted", True, "webhook-unprotected",
        )  # fmt: skip
        verdict = table.stdout.splitlines()[-1]
        assert verdict.startswith(
            "Verdict: unprotected: webhook graceful-drain does not protect evictions ("
        ), verdict
        assert "could not connect" in verdict and table.code == 4
        assert verdict.endswith("; 1 outage(s): default/Deployment/web"), verdict
        assert status.code == 1, status.stderr
        assert status.stdout.startswith("Webhook: UNPROTECTED: failurePolicy Ignore"), status.stdout
        # What plan predicted: the drain went through unchecked, no rollout was asked for.
        assert drained.code == 0, drained.stderr
        assert RESTARTED_AT_ANNOTATION not in annotations_of(await cluster.deployment())


async def test_kubectl_graceful_drain_works_as_a_plugin_under_the_read_only_cluster_role(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        await cluster.start_replica()
        await cluster.create_web()
        applied = await cluster.kubectl("apply", "-k", str(REPO / "deploy" / "cli"))
        assert applied.code == 0, applied.stderr
        bound = await cluster.kubectl("create", "clusterrolebinding", "alice-viewer",
                                      f"--clusterrole={VIEWER_ROLE}", "--user=alice")  # fmt: skip
        assert bound.code == 0, bound.stderr
        alice = sim.write_kubeconfig(tmp_path / "alice", sim.user_token("alice"), "alice")
        bob = sim.write_kubeconfig(tmp_path / "bob", sim.user_token("bob"), "bob")

        plan = await run(["kubectl", "graceful-drain", "plan", "node-a", "--json"], alice)
        status = await run(["kubectl", "graceful-drain", "status", "--json"], alice)
        plan_yaml = await run(["kubectl", "graceful-drain", "plan", "node-a", "-o", "yaml"], alice)
        status_yaml = await run(["kubectl", "graceful-drain", "status", "-o", "yaml"], alice)
        plan_o_json = await run(["kubectl", "graceful-drain", "plan", "node-a", "-o", "json"],
                                alice)  # fmt: skip
        unknown = await run(["kubectl", "graceful-drain", "plan", "node-z"], alice)
        refused = await run(["kubectl", "graceful-drain", "plan", "node-a"], bob)

        assert plan.code == 0, plan.stderr
        document = json.loads(plan.stdout)
        assert (document["kind"], document["node"], document["verdict"]) == (
            "DrainPlan", "node-a", "safe",
        )  # fmt: skip
        assert document["webhook"]["protection"] == "unverified"  # a Service, no address
        [web] = [p for p in document["pods"] if p["workload"] == "Deployment/web"]
        assert (web["outcome"], web["decision"]["reason"]) == ("held", "rollout-requested")
        assert status.code == 0, status.stderr
        assert json.loads(status.stdout)["held"] == []
        # -o yaml and -o json print the same documents as --json (but for when they looked).
        for other, json_run in ((plan_yaml, plan), (status_yaml, status), (plan_o_json, plan)):
            assert other.code == json_run.code, other.stderr
            assert not other.stdout.lstrip().startswith("{") or other is plan_o_json
            assert without_time(yaml.safe_load(other.stdout)) == without_time(
                json.loads(json_run.stdout))  # fmt: skip
        assert (unknown.code, unknown.stdout) == (3, "")
        assert unknown.stderr.strip() == "graceful-drain plan: error: node 'node-z' not found"
        assert refused.code == 3
        assert "403" in refused.stderr and "deploy/cli/" in refused.stderr
        forbidden = [r for r in sim.audit.records(user="alice") if r.code == 403]
        assert forbidden == [], [(r.verb, r.resource, r.name) for r in forbidden]
        assert any(r.resource == "leases" for r in sim.audit.records(user="alice"))
