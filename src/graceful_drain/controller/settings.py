"""The values the controller process runs with (`ControllerConfig`), plain and already valid.

`graceful_drain.config` builds them from flags and `GRACEFUL_DRAIN_*` variables and hands them
down; the controller never reads flags, variables or that module (it sits above).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

from graceful_drain.annotations import DEFAULT_ROLLOUT_TIMEOUT
from graceful_drain.controller.decision.table import DecisionConfig, Protect
from graceful_drain.kube.timefmt import format_go_duration

LogFormat = Literal["json", "console"]


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    rollout_timeout: timedelta = DEFAULT_ROLLOUT_TIMEOUT
    enabled_annotation: str | None = None
    namespaces: tuple[str, ...] | None = None  # None: every namespace
    protect: Protect = Protect.LAST_READY
    bind_address: str = "0.0.0.0"
    webhook_port: int = 8443
    metrics_port: int = 8080
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_reload_interval: timedelta = timedelta(seconds=10)
    self_signed: bool = False
    log_format: LogFormat = "console"
    log_level: str = "info"
    leader_elect: bool = False
    kubeconfig: Path | None = None
    kube_context: str | None = None
    # Where the controller's own objects live (Lease, self-signed Secret); None: read it from
    # the in-cluster service account, else DEFAULT_CONTROLLER_NAMESPACE.
    controller_namespace: str | None = None
    service_name: str = "graceful-drain-webhook"  # deploy/base/service.yaml
    self_signed_secret: str = "graceful-drain-webhook-tls"
    # --self-signed: where the pod also mounts the serving Secret (an optional volume), so a
    # (re)start serves the last known certificate before the API server answers.
    self_signed_mount: Path = Path("/var/run/graceful-drain/webhook-tls")
    webhook_configuration: str = "graceful-drain"
    lease_name: str = "graceful-drain"
    # Extra subject alternative names of the --self-signed certificate (DNS names or IPs).
    self_signed_hosts: tuple[str, ...] = ()

    def log_fields(self) -> dict[str, str | int | bool | list[str] | None]:
        """The effective configuration, logged once at start-up: every field, durations as
        Go durations, paths as text."""
        fields: dict[str, str | int | bool | list[str] | None] = {}
        for field in dataclasses.fields(self):
            name, value = field.name, getattr(self, field.name)
            if isinstance(value, timedelta):
                value = format_go_duration(value)
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            fields[name] = value
        return fields

    def decision_config(self) -> DecisionConfig:
        """What the webhook decides with (also what `plan` and `status` decide with)."""
        return DecisionConfig(
            rollout_timeout=self.rollout_timeout,
            enabled_annotation=self.enabled_annotation,
            namespaces=None if self.namespaces is None else frozenset(self.namespaces),
            protect=self.protect,
        )
