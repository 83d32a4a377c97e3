"""How the webhook and the reconciler write to a Deployment: one JSON patch at a time."""

from __future__ import annotations

from typing import Any, Protocol

from lightkube import AsyncClient
from lightkube.resources.apps_v1 import Deployment
from lightkube.types import PatchType


class DeploymentPatcher(Protocol):
    async def patch_json(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> None:
        """Apply a JSON patch; raise (lightkube ApiError, httpx error...) when it fails."""


class LightkubeDeploymentPatcher:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def patch_json(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> None:
        await self._client.patch(
            Deployment, name, patch, namespace=namespace, patch_type=PatchType.JSON
        )
