"""The installed controller's configuration, as `plan` and `status` need it: the rollout
timeout and enabled annotation the webhook decides with, the Lease it elects a leader with,
and the ValidatingWebhookConfiguration it is registered through.

Read from the controller's Deployment (its container's arguments and literal environment,
parsed by the controller's own `resolve`); a flag given to the command wins; when the
Deployment cannot be read, the controller's defaults apply and `source` says so.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from graceful_drain.config import controller_parser, resolve
from graceful_drain.controller.decision.table import DecisionConfig
from graceful_drain.controller.settings import ControllerConfig
from graceful_drain.errors import ConfigError

DEFAULT_CONTROLLER_NAMESPACE = "graceful-drain"
DEFAULT_CONTROLLER_DEPLOYMENT = "graceful-drain"


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    decision: DecisionConfig
    namespace: str  # where its Deployment and Lease live
    lease_name: str
    leader_elect: bool
    webhook_configuration: str
    source: str  # where the values came from, for the reader


def _container(deployment: Mapping[str, Any]) -> Mapping[str, Any] | None:
    containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in containers.get("containers") or []:
        if (container.get("command") or [])[-1:] == ["controller"]:
            return container  # type: ignore[no-any-return]
    return None


def installed_config(deployment: Mapping[str, Any]) -> ControllerConfig:
    """The configuration the Deployment's container starts with. Raises ConfigError."""
    container = _container(deployment)
    if container is None:
        raise ConfigError("no container runs `graceful-drain controller`")
    env = {
        str(variable["name"]): str(variable["value"])
        for variable in container.get("env") or []
        if "value" in variable
    }
    args = controller_parser().parse_known_args(
        [str(arg) for arg in container.get("args") or []], argparse.Namespace()
    )[0]
    return resolve(args, env)


def controller_settings(
    deployment: Mapping[str, Any] | None,
    namespace: str,
    *,
    rollout_timeout: timedelta | None = None,
    enabled_annotation: str | None = None,
) -> ControllerSettings:
    source = f"Deployment {namespace}/{DEFAULT_CONTROLLER_DEPLOYMENT}"
    config = ControllerConfig()
    if deployment is None:
        source = f"defaults ({source} not found)"
    else:
        try:
            config = installed_config(deployment)
        except ConfigError as error:
            source = f"defaults ({source} unreadable: {error})"
    if rollout_timeout is not None:
        config = replace(config, rollout_timeout=rollout_timeout)
    if enabled_annotation is not None:
        config = replace(config, enabled_annotation=enabled_annotation or None)
    return ControllerSettings(
        decision=config.decision_config(),
        namespace=namespace,
        lease_name=config.lease_name,
        leader_elect=config.leader_elect,
        webhook_configuration=config.webhook_configuration,
        source=source,
    )
