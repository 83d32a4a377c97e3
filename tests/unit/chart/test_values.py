"""The chart bends where operators need it to (labels, ServiceAccount, security contexts,
spreading, extra flags and variables, monitoring details) while its schema stays strict and
describes every value; the ci/*-values.yaml sets each render valid objects; the README's
values table is the schema's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from graceful_drain.config import parse_controller_config
from tests.unit.chart.rendered import (
    CHART,
    CI_VALUES,
    KUBE_VERSION,
    MONITORING_APIS,
    RELEASE,
    Obj,
    TemplateError,
    run_helm,
    template,
)
from tests.unit.chart.test_chart import by_kind, container, validate

REPO = CHART.parents[1]
VALUES_TABLE_SCRIPT = REPO / "scripts" / "chart-values-table"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())
EVERY_VALUE = yaml.safe_load((CHART / "ci" / "every-value-values.yaml").read_text())
SELECTOR = {
    "app.kubernetes.io/name": "graceful-drain",
    "app.kubernetes.io/component": "controller",
    "app.kubernetes.io/instance": RELEASE,
}
# What templates/deployment.yaml hard-coded before these became values.
RESTRICTED_POD = {
    "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}  # fmt: skip
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
    "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}  # fmt: skip
SPREAD = [
    {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
     "labelSelector": {"matchLabels": SELECTOR}}
    for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone")
]  # fmt: skip


def pod_spec(items: list[Obj]) -> Obj:
    [deployment] = by_kind(items, "Deployment")
    spec: Obj = deployment["spec"]["template"]["spec"]
    return spec


def schema_nodes(node: Obj, path: str = "") -> Iterator[tuple[str, Obj]]:
    for key, child in node.get("properties", {}).items():
        name = f"{path}.{key}" if path else key
        yield name, child
        yield from schema_nodes(child, name)


@pytest.mark.parametrize("values_file", CI_VALUES, ids=[p.name for p in CI_VALUES])
def test_each_ci_values_file_renders_valid_objects_and_lints(values_file: Path) -> None:
    items = template(yaml.safe_load(values_file.read_text()))
    assert by_kind(items, "Deployment")
    for item in items:
        validate(item)
    result = run_helm("lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION,
                      "--values", str(values_file))  # fmt: skip
    assert "0 chart(s) failed" in result.stdout, result.stdout


def test_the_ci_values_files_are_there() -> None:
    assert {p.name for p in CI_VALUES} >= {"default-values.yaml", "every-value-values.yaml"}


def test_every_value_in_the_schema_is_described() -> None:
    nodes = list(schema_nodes(SCHEMA))
    assert len(nodes) > 80
    assert [name for name, node in nodes if not str(node.get("description", "")).strip()] == []


def test_every_object_level_of_the_schema_refuses_unknown_keys() -> None:
    """A value object either lists its keys (and refuses others) or is a Kubernetes object
    or map passed through as is (resources, securityContext, labels...)."""
    for name, node in [("", SCHEMA), *schema_nodes(SCHEMA)]:
        if "properties" in node:
            assert node.get("additionalProperties") is False, name


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"commonLabel": {"a": "b"}}, "additional properties 'commonLabel' not allowed"),
        ({"serviceAccount": {"create": True, "nmae": "x"}}, "additional properties 'nmae'"),
        ({"service": {"type": "NodePort"}}, "additional properties 'type' not allowed"),
        ({"serviceMonitor": {"enabled": True, "relabeling": []}}, "'relabeling' not allowed"),
        ({"serviceMonitor": {"enabled": True, "additionalLabels": {"a-b": "c"}}},
         "invalid propertyName 'a-b'"),
        ({"grafanaDashboard": {"enabled": True, "clusterLabel": "my-cluster"}},
         "/grafanaDashboard/clusterLabel"),
        ({"extraArgs": ["log-level=debug"]}, "/extraArgs/0"),
        ({"extraEnv": [{"value": "x"}]}, "/extraEnv/0"),
        ({"topologySpreadConstraints": [{"topologyKey": "zone"}]}, "/topologySpreadConstraints/0"),
        ({"commonLabels": {"team": 1}}, "/commonLabels/team"),
        ({"serviceAccount": {"create": False}}, "serviceAccount.create=false needs"),
        ({"image": {"digest": "sha256:abc"}}, "/image/digest"),
        ({"image": {"digest": "0.1.0"}}, "/image/digest"),
        ({"image": {"digest": "sha512:" + "a" * 128}}, "/image/digest"),
        ({"commonAnnotations": {"a": 1}}, "/commonAnnotations/a"),
        ({"envFrom": ["config"]}, "/envFrom/0"),
        ({"extraVolumes": [{"emptyDir": {}}]}, "/extraVolumes/0"),
        ({"extraVolumeMounts": [{"name": "x"}]}, "/extraVolumeMounts/0"),
        ({"extraContainers": [{"image": "x"}]}, "/extraContainers/0"),
        ({"initContainers": [{"image": "x"}]}, "/initContainers/0"),
        ({"terminationGracePeriodSeconds": -1}, "/terminationGracePeriodSeconds"),
        ({"revisionHistoryLimit": "5"}, "/revisionHistoryLimit"),
    ],
)  # fmt: skip
def test_unknown_or_wrong_values_are_refused(values: Obj, message: str) -> None:
    with pytest.raises(TemplateError) as refused:
        template(values)
    assert message in str(refused.value)


def test_the_defaults_are_the_restricted_contexts_and_the_two_spread_constraints() -> None:
    items = template()
    spec = pod_spec(items)
    assert spec["securityContext"] == RESTRICTED_POD
    assert container(items)["securityContext"] == RESTRICTED_CONTAINER
    assert spec["topologySpreadConstraints"] == SPREAD
    assert container(items)["args"] == ["--self-signed"]
    [account] = by_kind(items, "ServiceAccount")
    assert account["metadata"]["name"] == spec["serviceAccountName"] == "graceful-drain"
    assert "annotations" not in account["metadata"]


def test_every_new_value_reaches_its_object() -> None:
    items = template(EVERY_VALUE)
    for item in items:
        assert item["metadata"]["labels"]["example.com/team"] == "platform", item["kind"]
    [deployment] = by_kind(items, "Deployment")
    assert deployment["spec"]["template"]["metadata"]["labels"]["example.com/team"] == "platform"
    assert deployment["spec"]["selector"]["matchLabels"] == SELECTOR  # the selector stays

    spec = pod_spec(items)
    [account] = by_kind(items, "ServiceAccount")
    assert account["metadata"]["name"] == spec["serviceAccountName"] == "graceful-drain-ci"
    assert account["metadata"]["annotations"] == EVERY_VALUE["serviceAccount"]["annotations"]
    subjects = [s for b in by_kind(items, "RoleBinding") + by_kind(items, "ClusterRoleBinding")
                for s in b["subjects"]]  # fmt: skip
    assert subjects and {s["name"] for s in subjects} == {"graceful-drain-ci"}
    [policy] = by_kind(items, "ValidatingAdmissionPolicy")
    [condition] = policy["spec"]["matchConditions"]
    assert "system:serviceaccount:graceful-drain:graceful-drain-ci'" in condition["expression"]

    assert spec["securityContext"] == EVERY_VALUE["podSecurityContext"]
    assert container(items)["securityContext"] == EVERY_VALUE["securityContext"]
    [constraint] = spec["topologySpreadConstraints"]
    assert constraint == {**EVERY_VALUE["topologySpreadConstraints"][0],
                          "labelSelector": {"matchLabels": SELECTOR}}  # fmt: skip
    assert container(items)["args"] == ["--self-signed", "--tls-reload-interval=30s"]
    assert container(items)["env"][-1] == {"name": "TZ", "value": "UTC"}
    [service] = by_kind(items, "Service")
    assert service["metadata"]["annotations"] == {"example.com/owner": "platform"}

    [monitor] = by_kind(items, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    [endpoint] = monitor["spec"]["endpoints"]
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("15s", "5s")
    assert endpoint["relabelings"] == [
        {"action": "replace", "targetLabel": "cluster", "replacement": "ci"},
        *EVERY_VALUE["serviceMonitor"]["relabelings"],
    ]
    [dashboard] = [c for c in by_kind(items, "ConfigMap") if c["metadata"]["name"].endswith(
        "-dashboard")]  # fmt: skip
    variables = json.loads(dashboard["data"]["graceful-drain.json"])["templating"]["list"]
    [label] = [v for v in variables if v["name"] == "cluster_label"]
    assert label["query"] == "kubernetes_cluster"


def test_a_spread_constraint_with_its_own_selector_keeps_it_and_none_can_be_asked() -> None:
    own = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchExpressions": [
               {"key": "app", "operator": "In", "values": ["x"]}]}}  # fmt: skip
    assert pod_spec(template({"topologySpreadConstraints": [own]}))[
        "topologySpreadConstraints"] == [own]  # fmt: skip
    assert "topologySpreadConstraints" not in pod_spec(template({"topologySpreadConstraints": []}))
    assert "securityContext" not in pod_spec(template({"podSecurityContext": None}))


def test_an_existing_service_account_is_used_and_not_created() -> None:
    items = template({"serviceAccount": {"create": False, "name": "shared-sa"}})
    assert by_kind(items, "ServiceAccount") == []
    assert pod_spec(items)["serviceAccountName"] == "shared-sa"
    for binding in by_kind(items, "RoleBinding") + by_kind(items, "ClusterRoleBinding"):
        assert [s["name"] for s in binding["subjects"]] == ["shared-sa"]


MONITORING_ON = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}


@pytest.mark.parametrize(
    ("values", "served", "rendered"),
    [
        (MONITORING_ON, MONITORING_APIS, {"ServiceMonitor", "PrometheusRule"}),
        (MONITORING_ON, (), set()),
        (MONITORING_ON, MONITORING_APIS[:1], {"ServiceMonitor"}),
        ({"serviceMonitor": {"enabled": True, "apiCheck": False},
          "prometheusRule": {"enabled": True, "apiCheck": False}}, (),
         {"ServiceMonitor", "PrometheusRule"}),
        ({}, MONITORING_APIS, set()),
    ],
)  # fmt: skip
def test_monitoring_objects_are_rendered_only_where_their_api_is_served(
    values: Obj, served: tuple[str, ...], rendered: set[str]
) -> None:
    kinds = {item["kind"] for item in template(values, api_versions=served)}
    assert kinds & {"ServiceMonitor", "PrometheusRule"} == rendered


def _table_check(chart: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(VALUES_TABLE_SCRIPT), "--check", "--chart",
                           str(chart)], capture_output=True, text=True, timeout=60)  # fmt: skip


def test_the_readme_values_table_is_the_schemas() -> None:
    result = _table_check(CHART)
    assert result.returncode == 0, result.stderr
    readme = (CHART / "README.md").read_text()
    for name, node in schema_nodes(SCHEMA):
        if "properties" not in node:
            assert f"| `{name}` |" in readme


def test_the_table_check_sees_a_value_added_without_regenerating(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    schema: Any = json.loads((chart / "values.schema.json").read_text())
    schema["properties"]["replicaCount"]["description"] = "How many replicas, changed."
    (chart / "values.schema.json").write_text(json.dumps(schema))
    result = _table_check(chart)
    assert result.returncode == 1
    assert "stale" in result.stderr


EXTENSIONS = yaml.safe_load((CHART / "ci" / "extensions-values.yaml").read_text())


def test_the_defaults_of_the_pod_extensions_render_what_they_did_before() -> None:
    items = template()
    [deployment] = by_kind(items, "Deployment")
    spec = pod_spec(items)
    assert deployment["spec"]["revisionHistoryLimit"] == 5
    assert spec["terminationGracePeriodSeconds"] == 30
    assert [c["name"] for c in spec["containers"]] == ["controller"]
    assert "initContainers" not in spec and "envFrom" not in container(items)
    assert [v["name"] for v in spec["volumes"]] == ["tmp", "webhook-tls"]
    assert all("annotations" not in item["metadata"] for item in items
               if item["kind"] != "ValidatingWebhookConfiguration")  # fmt: skip


def test_each_pod_extension_reaches_the_pod() -> None:
    items = template(EXTENSIONS)
    [deployment] = by_kind(items, "Deployment")
    spec = pod_spec(items)
    controller = container(items)
    assert deployment["spec"]["revisionHistoryLimit"] == 2
    assert spec["terminationGracePeriodSeconds"] == 45
    assert controller["envFrom"] == EXTENSIONS["envFrom"]
    assert spec["volumes"][-1] == EXTENSIONS["extraVolumes"][0]
    assert controller["volumeMounts"][-1] == EXTENSIONS["extraVolumeMounts"][0]
    assert [c["name"] for c in spec["containers"]] == ["controller", "proxy"]
    assert spec["containers"][1] == EXTENSIONS["extraContainers"][0]
    assert spec["initContainers"] == EXTENSIONS["initContainers"]
    for item in items:
        validate(item)


def test_common_annotations_reach_every_object_and_an_objects_own_win() -> None:
    items = template(EXTENSIONS)
    common = EXTENSIONS["commonAnnotations"]
    for item in items:
        assert item["metadata"]["annotations"].keys() >= common.keys(), item["kind"]
    [service] = by_kind(items, "Service")
    assert service["metadata"]["annotations"]["example.com/owner"] == "service-team"
    [deployment] = by_kind(items, "Deployment")
    assert deployment["metadata"]["annotations"] == common
    assert deployment["spec"]["template"]["metadata"]["annotations"] == {
        "example.com/owner": "platform", "example.com/contact": "pods@example.com"
    }  # fmt: skip
    # cert-manager's injection annotation stays beside them.
    cert_manager = template({**EXTENSIONS, "tls": {"mode": "cert-manager"}})
    [configuration] = by_kind(cert_manager, "ValidatingWebhookConfiguration")
    assert configuration["metadata"]["annotations"] == {
        **common, "cert-manager.io/inject-ca-from": "graceful-drain/graceful-drain-webhook"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("values", "level"),
    [
        ({"log": {"level": "info"}, "extraArgs": ["--log-level=debug"]}, "debug"),
        ({"log": {"level": "warning"}}, "warning"),
        # A variable in extraEnv comes after the chart's: Kubernetes keeps the last one.
        ({"log": {"level": "info"},
          "extraEnv": [{"name": "GRACEFUL_DRAIN_LOG_LEVEL", "value": "error"}]}, "error"),
        ({"extraEnv": [{"name": "GRACEFUL_DRAIN_LOG_LEVEL", "value": "error"}],
          "extraArgs": ["--log-level=debug"]}, "debug"),
    ],
)  # fmt: skip
def test_extra_args_win_over_the_values_they_overlap(values: Obj, level: str) -> None:
    """values.yaml's one rule, through the controller's own configuration parser: a flag
    wins over its variable; among variables, the last of a name (as the kubelet does)."""
    controller = container(template(values))
    env = {v["name"]: v["value"] for v in controller["env"] if "value" in v}  # last one wins
    config = parse_controller_config(controller["args"], env)
    assert config.log_level == level
