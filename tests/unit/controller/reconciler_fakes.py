"""The reconciler's two collaborators as test doubles: a Deployment source holding one
Deployment, and a patcher that records each JSON patch (and raises `failure` once set)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graceful_drain.controller.decision.model import DeploymentInfo
from graceful_drain.controller.reconcile.reconciler import DeploymentChange


@dataclass
class Source:
    current: DeploymentInfo
    handlers: list[Callable[[DeploymentChange], None]] = field(default_factory=list)

    def get(self, namespace: str, name: str) -> DeploymentInfo | None:
        return self.current

    def items(self) -> list[DeploymentInfo]:
        return [self.current]

    def add_handler(self, handler: Callable[[DeploymentChange], None]) -> None:
        self.handlers.append(handler)


@dataclass
class Patcher:
    patches: list[list[dict[str, Any]]] = field(default_factory=list)
    failure: BaseException | None = None

    async def patch_json(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> None:
        self.patches.append(patch)
        if self.failure is not None:
            raise self.failure
