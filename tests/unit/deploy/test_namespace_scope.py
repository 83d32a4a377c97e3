"""deploy/components/namespace-scope: the controller's --namespaces and the webhook's
namespaceSelector, set together, built with `kubectl kustomize` as docs/install.md says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from graceful_drain.config import parse_controller_config
from tests.unit.deploy.rendered import (
    CERT_MANAGER,
    DEPLOY,
    SELF_SIGNED,
    Variant,
    controller_container,
    literal_env,
    one,
    render,
)

COMPONENT = DEPLOY / "components" / "namespace-scope"


def overlay(directory: Path, variant: Variant) -> Path:
    """An operator's kustomization: a variant of deploy/ plus the component."""
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(variant.directory, directory)}\n"
        f"components:\n  - {os.path.relpath(COMPONENT, directory)}\n"
    )
    return directory


@pytest.mark.parametrize(
    "variant", [SELF_SIGNED, CERT_MANAGER], ids=["self-signed", "cert-manager"]
)
def test_the_scope_and_the_webhook_selector_name_the_same_namespaces(
    tmp_path: Path, variant: Variant
) -> None:
    items = [d for d in yaml.safe_load_all(render(overlay(tmp_path, variant))) if d]

    scope = literal_env(controller_container(items))["GRACEFUL_DRAIN_NAMESPACES"]
    [hook] = one(items, "ValidatingWebhookConfiguration")["webhooks"]
    [expression] = hook["namespaceSelector"]["matchExpressions"]

    assert expression["key"] == "kubernetes.io/metadata.name"
    assert expression["operator"] == "In"
    assert expression["values"] == scope.split(",")
    config = parse_controller_config(["--self-signed"], {"GRACEFUL_DRAIN_NAMESPACES": scope})
    assert config.namespaces == tuple(expression["values"])


def test_without_the_component_the_webhook_covers_every_namespace_but_two() -> None:
    items = [d for d in yaml.safe_load_all(render(DEPLOY)) if d]
    [hook] = one(items, "ValidatingWebhookConfiguration")["webhooks"]

    assert "GRACEFUL_DRAIN_NAMESPACES" not in literal_env(controller_container(items))
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "graceful-drain"],
        }
    ]
