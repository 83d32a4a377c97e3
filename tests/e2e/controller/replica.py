"""The controller as its Deployment would run it: the container's invocation, and one replica
running in this process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graceful_drain.controller.app import ControllerApp

from .installed import NAMESPACE

Obj = dict[str, Any]

# What the Downward API gives the container (deploy/base/deployment.yaml's fieldRefs).
FIELD_REFS = ("metadata.name", "metadata.namespace")


def container_invocation(
    deployment: Obj, pod_name: str
) -> tuple[list[str], dict[str, str], dict[str, int]]:
    """The controller container's arguments (after `graceful-drain controller`), environment
    (literal values and the Downward API fields) and named ports."""
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["graceful-drain", "controller"], container["command"]
    fields = {"metadata.name": pod_name, "metadata.namespace": NAMESPACE}
    env: dict[str, str] = {}
    for variable in container.get("env") or []:
        if "value" in variable:
            env[variable["name"]] = str(variable["value"])
        else:
            path = variable["valueFrom"]["fieldRef"]["fieldPath"]
            assert path in FIELD_REFS, f"{variable['name']}: unexpected source {path}"
            env[variable["name"]] = fields[path]
    ports = {port["name"]: int(port["containerPort"]) for port in container.get("ports") or []}
    return list(container.get("args") or []), env, ports


@dataclass
class Replica:
    pod_name: str
    app: ControllerApp
    running: bool = True

    @property
    def webhook_port(self) -> int:
        return self.app.webhook_site.port

    def decisions(self, reason: str, allowed: bool) -> float:
        value = self.app.metrics.registry.get_sample_value(
            "graceful_drain_decisions_total",
            {"allowed": "true" if allowed else "false", "reason": reason},
        )
        return value or 0.0

    def answering_seconds(self) -> float:
        """The sum of graceful_drain_admission_duration_seconds: every answer's time since its
        request arrived."""
        value = self.app.metrics.registry.get_sample_value(
            "graceful_drain_admission_duration_seconds_sum"
        )
        return value or 0.0

    async def stop(self) -> None:
        if self.running:
            self.running = False
            await self.app.stop()
