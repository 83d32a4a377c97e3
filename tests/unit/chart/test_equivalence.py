"""For its default values the chart installs what `kubectl kustomize deploy/` does.

Normalised before comparing, and nothing else: the labels only helm adds (instance,
managed-by, version, helm.sh/chart), wherever they appear, selectors included; the
Namespace, which the chart does not create (`helm install --namespace`, docs/install.md
"Helm"); and the controller container's arguments and environment, compared instead as the
configuration the controller resolves from them (`parse_controller_config`), so the chart
naming its objects explicitly (--lease-name and the like, at their default values) is no
difference; and the whitespace of CEL expressions (see `without_helm_labels`). The
cert-manager mode is compared with deploy/overlays/cert-manager likewise.
"""

from __future__ import annotations

import difflib
from typing import Any

import pytest
import yaml

from graceful_drain.config import parse_controller_config
from graceful_drain.controller.settings import ControllerConfig
from tests.unit.chart.rendered import Obj, mode_values, template
from tests.unit.deploy.rendered import CERT_MANAGER, SELF_SIGNED, Variant, objects

HELM_ONLY_LABELS = frozenset(
    {"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version",
     "helm.sh/chart"}
)  # fmt: skip
DOWNWARD_API = {"metadata.name": "graceful-drain-0", "metadata.namespace": "graceful-drain"}
IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}


def without_helm_labels(value: Any) -> Any:
    """Also CEL `expression`s with their whitespace collapsed: YAML folded scalars with
    more-indented lines come back from kustomize's re-serialisation with other line breaks,
    and CEL ignores whitespace (no string literal in these holds a run of it)."""
    if isinstance(value, dict):
        return {
            k: " ".join(v.split()) if k == "expression" and isinstance(v, str)
            else without_helm_labels(v)
            for k, v in value.items() if k not in HELM_ONLY_LABELS
        }  # fmt: skip
    if isinstance(value, list):
        return [without_helm_labels(item) for item in value]
    return value


def controller_config(container: Obj) -> ControllerConfig:
    env = dict(IN_CLUSTER)
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
        else:
            env[variable["name"]] = DOWNWARD_API[variable["valueFrom"]["fieldRef"]["fieldPath"]]
    return parse_controller_config(container.get("args", []), env)


def normalised(items: list[Obj]) -> tuple[dict[str, Obj], dict[str, ControllerConfig]]:
    """(objects by kind/namespace/name, the controller's resolved configuration by container)."""
    by_key: dict[str, Obj] = {}
    configs: dict[str, ControllerConfig] = {}
    for item in without_helm_labels(items):
        if item["kind"] == "Namespace":
            continue
        meta = item["metadata"]
        key = f"{item['kind']} {meta.get('namespace', '')}/{meta['name']}"
        if item["kind"] == "Deployment":
            for container in item["spec"]["template"]["spec"]["containers"]:
                configs[f"{key} {container['name']}"] = controller_config(container)
                # Compared as configuration above; the Downward API sources stay compared here.
                container.pop("args", None)
                container["env"] = [v for v in container.get("env", []) if "valueFrom" in v]
        by_key[key] = item
    return by_key, configs


def diff(expected: Obj, actual: Obj) -> str:
    lines = difflib.unified_diff(
        yaml.safe_dump(expected, sort_keys=True).splitlines(),
        yaml.safe_dump(actual, sort_keys=True).splitlines(),
        "kubectl kustomize", "helm template", lineterm="",
    )  # fmt: skip
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("mode", "variant"), [("self-signed", SELF_SIGNED), ("cert-manager", CERT_MANAGER)],
    ids=["self-signed", "cert-manager"],
)  # fmt: skip
def test_the_default_chart_is_deploy_in_substance(mode: str, variant: Variant) -> None:
    values = {} if mode == "self-signed" else mode_values(mode)
    chart, chart_configs = normalised(template(values))
    kustomize, kustomize_configs = normalised(objects(variant))

    assert sorted(chart) == sorted(kustomize)
    for key, expected in kustomize.items():
        assert chart[key] == expected, f"{key}:\n{diff(expected, chart[key])}"
    assert chart_configs == kustomize_configs


def test_the_comparison_sees_a_changed_value() -> None:
    chart, configs = normalised(
        template({"rolloutTimeout": "11m", "webhook": {"timeoutSeconds": 6}})
    )
    kustomize, kustomize_configs = normalised(objects(SELF_SIGNED))
    webhook = "ValidatingWebhookConfiguration /graceful-drain"
    assert chart[webhook] != kustomize[webhook]
    assert configs != kustomize_configs
