"""realcluster/versions.env names the versions realcluster/build keys its cache with; the Go
modules pin the same."""

from __future__ import annotations

import re
from pathlib import Path

REALCLUSTER = Path(__file__).resolve().parents[2] / "realcluster"


def versions() -> dict[str, str]:
    text = (REALCLUSTER / "versions.env").read_text(encoding="utf-8")
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", text, re.MULTILINE))


def test_informer_sync_pins_the_client_go_of_versions_env() -> None:
    go_mod = (REALCLUSTER / "go" / "informer-sync" / "go.mod").read_text(encoding="utf-8")
    pinned = re.findall(r"^\s*k8s\.io/client-go (v\S+)", go_mod, re.MULTILINE)
    assert pinned == [versions()["INFORMER_SYNC_CLIENT_GO_VERSION"]]


def test_the_registry_module_pins_the_distribution_of_versions_env() -> None:
    go_mod = (REALCLUSTER / "go" / "registry" / "go.mod").read_text(encoding="utf-8")
    assert "tool github.com/distribution/distribution/v3/cmd/registry" in go_mod
    pinned = re.findall(r"^\s*github\.com/distribution/distribution/v3 (v\S+)", go_mod, re.M)
    assert pinned == [versions()["REGISTRY_VERSION"]]


def test_the_signing_tools_pin_the_cosign_and_oras_of_versions_env() -> None:
    for module, tool, path, variable in (
        ("cosign", "github.com/sigstore/cosign/v2/cmd/cosign", r"github\.com/sigstore/cosign/v2",
         "COSIGN_VERSION"),
        ("oras", "oras.land/oras/cmd/oras", r"oras\.land/oras", "ORAS_VERSION"),
    ):  # fmt: skip
        go_mod = (REALCLUSTER / "go" / module / "go.mod").read_text(encoding="utf-8")
        assert f"tool {tool}" in go_mod
        pinned = re.findall(rf"^\s*{path} (v\S+)", go_mod, re.MULTILINE)
        assert pinned == [versions()[variable]], module
