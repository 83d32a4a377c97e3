"""The overlay example in docs/install.md renders against deploy/ and does what it says."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.unit.deploy.rendered import REPO, controller_container, literal_env, one, render

EXAMPLE = re.compile(r"```yaml\n(apiVersion: kustomize\.config\.k8s\.io/v1beta1\n.*?)```", re.S)


def test_customising_example_renders(tmp_path: Path) -> None:
    (example,) = EXAMPLE.findall((REPO / "docs" / "install.md").read_text())
    (tmp_path / "graceful-drain").symlink_to(REPO, target_is_directory=True)
    overlay = tmp_path / "mine"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(example)

    items = [doc for doc in yaml.safe_load_all(render(overlay)) if doc]
    container = controller_container(items)
    assert container["image"] == "registry.example.com/graceful-drain:0.1.0"
    assert literal_env(container)["GRACEFUL_DRAIN_ROLLOUT_TIMEOUT"] == "5m"
    assert container["args"] == ["--self-signed"]
    metrics_rule = one(items, "NetworkPolicy")["spec"]["ingress"][1]
    assert metrics_rule["from"][0]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
    }
