"""Scenario files: what validates, and errors that name the field at fault."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from kubesim.scenario import (
    DrainSpec,
    MeasureSpec,
    NodeSpec,
    ScenarioError,
    load_scenario,
    parse_scenario,
)

REPO = Path(__file__).parents[3]
EVICTION_DANCE = REPO / "scenarios" / "eviction-dance.yaml"

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"replicas": 2},
}
VALID: dict[str, Any] = {
    "name": "t",
    "nodes": [{"name": "a", "taints": [{"key": "k", "effect": "NoSchedule"}]}, {"name": "b"}],
    "manifests": [DEPLOYMENT],
    "drains": [{"node": "a", "client": "karpenter", "parameters": {}}],
}


def test_the_eviction_dance_scenario_reproduces_the_seed_setup() -> None:
    scenario = load_scenario(EVICTION_DANCE)
    assert [n.name for n in scenario.nodes] == ["node-a", "node-b"]
    [web] = scenario.manifests
    assert (web["kind"], web["metadata"]["name"]) == ("Deployment", "web")
    assert web["spec"]["replicas"] == 1
    assert web["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    template = web["spec"]["template"]
    assert "readinessProbe" in template["spec"]["containers"][0]
    assert template["metadata"]["annotations"]["sim.kubesim.io/ready-delay"] == "3s"
    assert scenario.drains == (
        DrainSpec(
            node="node-a",
            client="kubectl",
            after=2.0,
            parameters={"ignore_daemonsets": True, "timeout": 900.0},
        ),
    )
    assert scenario.measure == MeasureSpec("default", ("web",))
    assert scenario.deployment_replicas() == {("default", "web"): 1}


def test_a_valid_scenario_parses_with_defaults() -> None:
    scenario = parse_scenario(VALID)
    assert scenario.nodes[0] == NodeSpec(name="a", taints=({"key": "k", "effect": "NoSchedule"},))
    assert scenario.drains == (DrainSpec(node="a", client="karpenter"),)
    assert scenario.measure == MeasureSpec("default", ("web",))  # every Deployment by default
    assert scenario.controllers is None


def test_drain_parameters_take_go_durations_and_typed_values() -> None:
    doc = copy.deepcopy(VALID)
    doc["drains"] = [
        {"node": "a", "client": "cluster-autoscaler", "after": "1.5s",
         "parameters": {"max_pod_eviction_time": "2m", "eviction_retry_time": 0.05,
                        "max_graceful_termination_sec": 600}},
        {"node": "b", "client": "karpenter", "parameters": {"termination_grace_period": None}},
    ]  # fmt: skip
    first, second = parse_scenario(doc).drains
    assert first.after == 1.5
    assert first.parameters == {
        "max_pod_eviction_time": 120.0,
        "eviction_retry_time": 0.05,
        "max_graceful_termination_sec": 600,
    }
    assert second.parameters == {"termination_grace_period": None}


def edit(path: str, value: Any) -> dict[str, Any]:
    """VALID with the dotted `path` set to `value` (list indices as numbers)."""
    doc = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    target: Any = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        ([], "", "must be a mapping, got a list"),
        (edit("nodez", []), "nodez", "unknown field; known fields: name, description, nodes"),
        (edit("nodes", {}), "nodes", "must be a list, got a mapping"),
        (edit("nodes.0", {"capacity": {}}), "nodes[0].name", "is required"),
        (edit("nodes.1.name", "a"), "nodes[1].name", "duplicate node name 'a'"),
        (edit("nodes.1.capacity", {"gpu": 1}), "nodes[1].capacity.gpu", "unknown resource"),
        (edit("nodes.1.capacity", {"cpu": [2]}), "nodes[1].capacity.cpu", "must be a string"),
        (edit("nodes.0.taints.0.effect", "Never"), "nodes[0].taints[0].effect", "must be one of"),
        (edit("nodes.1.unschedulable", "yes"), "nodes[1].unschedulable", "must be a boolean"),
        (edit("manifests.0", {"apiVersion": "apps/v1", "kind": "Widget", "metadata": {}}),
         "manifests[0].kind", "kubesim does not serve apps/v1 Widget"),
        (edit("manifests.0", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
         "manifests[0].metadata.name", "must be a string, got NoneType"),
        (edit("drains.0.node", "c"), "drains[0].node", "no node named 'c'; nodes: a, b"),
        (edit("drains.0.client", "kured"), "drains[0].client",
         "unknown drain client; known: kubectl, karpenter, cluster-autoscaler"),
        (edit("drains.0.parameters", {"retry_intervall": 1}),
         "drains[0].parameters.retry_intervall", "unknown parameter of the karpenter client"),
        (edit("drains.0.parameters", {"requeue_interval": "soon"}),
         "drains[0].parameters.requeue_interval", "invalid duration 'soon'"),
        (edit("drains.0.parameters", {"requeue_interval": "-1s"}),
         "drains[0].parameters.requeue_interval", "invalid duration '-1s'"),
        (edit("drains.0.parameters", {"requeue_interval": -1}),
         "drains[0].parameters.requeue_interval", "must not be negative"),
        (edit("drains.0", {"node": "a", "client": "kubectl", "parameters": {"force": "yes"}}),
         "drains[0].parameters.force", "must be a boolean, got a string"),
        (edit("drains.0", {"node": "a", "client": "kubectl",
                           "parameters": {"grace_period_seconds": 1.5}}),
         "drains[0].parameters.grace_period_seconds", "must be an integer, got float"),
        (edit("drains.0.after", True), "drains[0].after", "must be a duration"),
        (edit("measure", {"deployments": ["api"]}), "measure.deployments[0]",
         "no Deployment 'api' in namespace 'default' among the manifests"),
        (edit("controllers", ["deployment", "kube-proxy"]), "controllers[1]",
         "unknown component; known: deployment, replicaset"),
    ],
)  # fmt: skip
def test_invalid_scenarios_name_the_field(doc: Any, field: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(doc, known_controllers=("deployment", "replicaset"))
    assert caught.value.field == field
    assert message in caught.value.message


def test_load_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [{name: a}]\ndrains: [{node: b, client: kubectl}]\n")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: drains\[0\]\.node: no node named 'b'"):
        load_scenario(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("nodes: [\n")
    with pytest.raises(ScenarioError, match=r"broken\.yaml: not valid YAML"):
        load_scenario(broken)
    with pytest.raises(ScenarioError, match=r"missing\.yaml: cannot read scenario file"):
        load_scenario(tmp_path / "missing.yaml")
