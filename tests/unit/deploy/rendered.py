"""The manifests under deploy/, rendered by `kubectl kustomize` as an operator would.

Two variants ship: the default (`deploy/`, the controller runs with --self-signed) and
`deploy/overlays/cert-manager` (serving certificate from cert-manager).
"""

from __future__ import annotations

import copy
import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
NAMESPACE = "graceful-drain"
SERVICE_ACCOUNT = "graceful-drain"
KUSTOMIZE_TIMEOUT = 60

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    directory: Path
    self_signed: bool


SELF_SIGNED = Variant("self-signed", DEPLOY, self_signed=True)
CERT_MANAGER = Variant("cert-manager", DEPLOY / "overlays" / "cert-manager", self_signed=False)
VARIANTS = (SELF_SIGNED, CERT_MANAGER)
by_variant = pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])


@functools.cache
def render(directory: Path) -> str:
    """`kubectl kustomize DIR`; fails the test with kubectl's stderr if it does not render."""
    result = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=KUSTOMIZE_TIMEOUT,
    )
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed:\n{result.stderr}")
    return result.stdout


@functools.cache
def _parsed(directory: Path) -> tuple[Obj, ...]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(doc for doc in yaml.load_all(render(directory), Loader=loader) if doc)


def objects(variant: Variant) -> list[Obj]:
    """The rendered objects; a fresh copy each call, so callers may mutate them."""
    return copy.deepcopy(list(_parsed(variant.directory)))


def find(items: list[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [
        item
        for item in items
        if item["kind"] == kind and (name is None or item["metadata"]["name"] == name)
    ]


def one(items: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = find(items, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def controller_container(items: list[Obj]) -> Obj:
    containers = one(items, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: Obj = containers[0]
    return container


def literal_env(container: Obj) -> dict[str, str]:
    """Environment variables with a literal value (not valueFrom)."""
    return {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}


def container_port(container: Obj, name: str) -> int:
    ports = [port["containerPort"] for port in container["ports"] if port["name"] == name]
    assert len(ports) == 1, f"container port {name!r}: {ports}"
    return int(ports[0])


def is_cert_manager(item: Obj) -> bool:
    return str(item["apiVersion"]).startswith("cert-manager.io/")
