"""The chart passes `helm lint --strict`, renders valid Kubernetes objects in every TLS mode,
and its values do what values.yaml says (one value scopes the controller, the webhook and
the RBAC together; the schema and the templates refuse what cannot work)."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
import yaml

from graceful_drain.config import ENV_PREFIX
from tests.unit.chart.rendered import (
    CHART,
    KUBE_VERSION,
    TLS_MODES,
    Obj,
    TemplateError,
    mode_values,
    run_helm,
    template,
)
from tests.unit.deploy.test_schema import CERT_MANAGER_SCHEMAS, unknown_fields

EVERYTHING_ON = {
    "serviceMonitor": {"enabled": True},
    "prometheusRule": {"enabled": True},
    "grafanaDashboard": {"enabled": True},
}
_ENDPOINT = {"port": None, "path": None, "scheme": None, "interval": None, "scrapeTimeout": None,
             "relabelings": None}  # fmt: skip
_METADATA = {"name": None, "namespace": None, "labels": None}
# monitoring.coreos.com/v1 fields the chart uses (prometheus-operator's API reference).
MONITORING_SCHEMAS: dict[str, Any] = {
    "ServiceMonitor": {"apiVersion": None, "kind": None, "metadata": _METADATA,
                       "spec": {"selector": {"matchLabels": None}, "endpoints": None}},
    "PrometheusRule": {"apiVersion": None, "kind": None, "metadata": _METADATA,
                       "spec": {"groups": None}},
}  # fmt: skip


def by_kind(items: list[Obj], kind: str) -> list[Obj]:
    return [item for item in items if item["kind"] == kind]


def container(items: list[Obj]) -> Obj:
    [deployment] = by_kind(items, "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    [controller] = [c for c in containers if c["name"] == "controller"]  # extraContainers aside
    return dict(controller)


def env_of(items: list[Obj]) -> dict[str, str]:
    return {v["name"]: v["value"] for v in container(items)["env"] if "value" in v}


def webhook_selector(items: list[Obj]) -> Obj:
    [configuration] = by_kind(items, "ValidatingWebhookConfiguration")
    selector: Obj = configuration["webhooks"][0]["namespaceSelector"]
    return selector


def validate(item: Obj) -> None:
    """Against the Kubernetes OpenAPI schemas (kubernetes-validate, offline, strict: unknown
    fields are errors); CRD kinds against the fields their v1 APIs define."""
    group = str(item["apiVersion"]).partition("/")[0]
    if group == "cert-manager.io":
        assert unknown_fields(item, CERT_MANAGER_SCHEMAS[item["kind"]]) == [], item
    elif group == "monitoring.coreos.com":
        assert unknown_fields(item, MONITORING_SCHEMAS[item["kind"]]) == [], item
        for endpoint in item["spec"].get("endpoints", []):
            assert unknown_fields(endpoint, _ENDPOINT) == [], endpoint
    else:
        kubernetes_validate.validate(item, KUBE_VERSION, strict=True)


def test_helm_lint_strict_passes_in_every_mode() -> None:
    for mode in TLS_MODES:
        sets = [f"tls.mode={mode}"]
        if mode == "secret":
            sets += ["tls.secret.name=my-webhook-tls", "tls.secret.caBundle=Y2EK"]
        result = run_helm("lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION,
                          *[arg for s in sets for arg in ("--set", s)])  # fmt: skip
        assert "0 chart(s) failed" in result.stdout, result.stdout


@pytest.mark.parametrize("mode", TLS_MODES)
def test_every_object_is_valid_against_the_kubernetes_schemas(mode: str) -> None:
    items = template(mode_values(mode) | EVERYTHING_ON)
    assert {item["kind"] for item in items} >= {
        "Deployment", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
        "PriorityClass", "PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor",
        "PrometheusRule", "ConfigMap",
    }  # fmt: skip
    for item in items:
        validate(item)


def test_the_validation_sees_an_unknown_field() -> None:
    deployment = copy.deepcopy(by_kind(template(), "Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFilesytem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSION, strict=True)


def test_one_value_scopes_the_controller_the_webhook_and_the_rbac() -> None:
    items = template({"namespaces": ["team-a", "team-b"]})
    assert env_of(items)[f"{ENV_PREFIX}NAMESPACES"] == "team-a,team-b"
    assert webhook_selector(items) == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
    ]}  # fmt: skip
    bindings = {
        (b["metadata"].get("namespace"), b["roleRef"]["name"])
        for b in by_kind(items, "RoleBinding") + by_kind(items, "ClusterRoleBinding")
        if b["roleRef"]["name"] == "graceful-drain"
    }
    assert bindings == {("team-a", "graceful-drain"), ("team-b", "graceful-drain")}


def test_unscoped_the_webhook_skips_the_release_namespace_and_the_excluded_ones() -> None:
    items = template({"excludedNamespaces": ["kube-system", "monitoring"]}, namespace="ops")
    assert f"{ENV_PREFIX}NAMESPACES" not in env_of(items)
    assert webhook_selector(items)["matchExpressions"][0] == {
        "key": "kubernetes.io/metadata.name", "operator": "NotIn",
        "values": ["kube-system", "monitoring", "ops"],
    }  # fmt: skip


def test_every_controller_knob_reaches_the_controller() -> None:
    items = template({
        "rolloutTimeout": "3m", "enabledAnnotation": "example.com/drain-protect",
        "protect": "single-replica",
        "leaderElection": {"enabled": False, "leaseName": "my-lease"},
        "log": {"format": "console", "level": "debug"},
        "webhook": {"port": 9443}, "metrics": {"port": 9090},
    })  # fmt: skip
    env = env_of(items)
    assert {key: env[f"{ENV_PREFIX}{key}"] for key in (
        "ROLLOUT_TIMEOUT", "PROTECT", "ENABLED_ANNOTATION", "LEADER_ELECT", "LEASE_NAME",
        "LOG_FORMAT", "LOG_LEVEL", "WEBHOOK_PORT", "METRICS_PORT",
    )} == {
        "ROLLOUT_TIMEOUT": "3m", "PROTECT": "single-replica",
        "ENABLED_ANNOTATION": "example.com/drain-protect",
        "LEADER_ELECT": "false", "LEASE_NAME": "my-lease", "LOG_FORMAT": "console",
        "LOG_LEVEL": "debug", "WEBHOOK_PORT": "9443", "METRICS_PORT": "9090",
    }  # fmt: skip
    assert not by_kind(items, "Role") or all(
        "leader-election" not in r["metadata"]["name"] for r in by_kind(items, "Role")
    )


def test_another_release_name_renames_every_object_and_the_controller_follows() -> None:
    items = template(release="gd", namespace="ops")
    env = env_of(items)
    assert env[f"{ENV_PREFIX}SERVICE_NAME"] == "gd-graceful-drain-webhook"
    assert env[f"{ENV_PREFIX}SELF_SIGNED_SECRET"] == "gd-graceful-drain-webhook-tls"
    assert env[f"{ENV_PREFIX}WEBHOOK_CONFIGURATION"] == "gd-graceful-drain"
    [policy] = by_kind(items, "ValidatingAdmissionPolicy")
    [condition] = policy["spec"]["matchConditions"]
    assert "system:serviceaccount:ops:gd-graceful-drain" in condition["expression"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"tls": {"mode": "secret"}}, "tls.mode=secret needs tls.secret.name"),
        ({"tls": {"mode": "secret", "secret": {"name": "x"}}}, "needs tls.secret.caBundle"),
        ({"tls": {"mode": "vault"}}, "value must be one of"),
        ({"rolloutTimeout": "ten minutes"}, "/rolloutTimeout"),
        ({"protect": "replicas"}, "/protect"),
        ({"namespaces": ["Team_A"]}, "/namespaces/0"),
        ({"namespaces": ["graceful-drain"]}, "must not list the release namespace"),
        ({"webhook": {"failurePolicy": "Maybe"}}, "/webhook/failurePolicy"),
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
    ],
)
def test_values_that_cannot_work_are_refused_with_a_message(values: Obj, message: str) -> None:
    with pytest.raises(TemplateError) as refused:
        template(values)
    assert message in str(refused.value)


DIGEST = "sha256:" + "0123456789abcdef" * 4
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


@pytest.mark.parametrize(
    ("image", "reference"),
    [
        ({}, f"ghcr.io/stonal/graceful-drain:{APP_VERSION}"),
        ({"tag": "1.2.3"}, "ghcr.io/stonal/graceful-drain:1.2.3"),
        ({"digest": DIGEST}, f"ghcr.io/stonal/graceful-drain@{DIGEST}"),
        ({"tag": "1.2.3", "digest": DIGEST}, f"ghcr.io/stonal/graceful-drain@{DIGEST}"),
        ({"repository": "127.0.0.1:5000/gd", "digest": DIGEST}, f"127.0.0.1:5000/gd@{DIGEST}"),
        ({"repository": "127.0.0.1:5000/gd", "digest": ""}, f"127.0.0.1:5000/gd:{APP_VERSION}"),
    ],
)  # fmt: skip
def test_the_image_is_named_by_digest_when_one_is_given(image: Obj, reference: str) -> None:
    assert container(template({"image": image}))["image"] == reference


def test_optional_objects_can_be_turned_off_and_pod_settings_reach_the_pod() -> None:
    items = template({
        "podDisruptionBudget": {"enabled": False}, "networkPolicy": {"enabled": False},
        "admissionPolicy": {"enabled": False},
        "priorityClass": {"create": False, "name": "system-cluster-critical"},
        "leaderElection": {"enabled": False}, "replicaCount": 3,
        "resources": {"requests": {"cpu": "50m"}},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "podAnnotations": {"example.com/a": "b"}, "podLabels": {"team": "platform"},
        "imagePullSecrets": [{"name": "registry"}],
        "image": {"repository": "registry.example/gd", "tag": "1.2.3", "pullPolicy": "Always"},
    })  # fmt: skip
    kinds = {item["kind"] for item in items}
    assert not kinds & {"PodDisruptionBudget", "NetworkPolicy", "ValidatingAdmissionPolicy",
                        "ValidatingAdmissionPolicyBinding", "PriorityClass"}  # fmt: skip
    assert all("leader-election" not in item["metadata"]["name"] for item in items)
    [deployment] = by_kind(items, "Deployment")
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["spec"]["tolerations"][0]["key"] == "dedicated"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["metadata"]["annotations"] == {"example.com/a": "b"}
    assert pod["metadata"]["labels"]["team"] == "platform"
    assert container(items)["image"] == "registry.example/gd:1.2.3"
    # Helm merges a map value into the default: the memory request and limit stay.
    assert container(items)["resources"] == {
        "requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}
    }  # fmt: skip
    assert env_of(items)[f"{ENV_PREFIX}LEADER_ELECT"] == "false"
    for item in items:
        validate(item)
