"""The detector's few API calls, as raw JSON, with every failure named as evidence.

:class:`ClusterReader` is what the collectors need; :class:`LightkubeReader` implements
it over lightkube's async client (in-cluster service account, or a kubeconfig).  Reads
return whatever ``json.loads`` made of the body, for the tolerant ``from_object``
parsers in :mod:`graceful_drain.termination.evidence`.  Every failure is raised as a
:class:`ReadFailure` carrying the :class:`Unavailable` it stands for: 401/403 →
forbidden, 404 → not_found, a client-side timeout → timeout, anything else → error.

Reads never send ``resourceVersion``, so the API server answers from etcd with a quorum
read, not from its watch cache (``resourceVersion=0`` could return a pod from before
the deletion that is the reason we are asking).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol, cast

import httpx2
from lightkube import AsyncClient, ConfigError
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.core.resource import Resource
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Event, Node, Pod

from graceful_drain.termination.evidence import Unavailable, UnavailableReason

FIELD_MANAGER = "graceful-drain-termination-detector"
EVENTS_PAGE_LIMIT = 500  # events for one pod UID; more than this is not worth a second page


class ReadFailure(Exception):
    """An API call that did not yield the object, as the evidence it becomes."""

    def __init__(self, reason: UnavailableReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.unavailable = Unavailable(reason, detail)


class ClusterReader(Protocol):
    async def get_pod(self, namespace: str, name: str) -> object: ...

    async def list_events(self, namespace: str, field_selector: str) -> object: ...

    async def get_node(self, name: str) -> object: ...

    async def get_replicaset(self, namespace: str, name: str) -> object: ...

    async def get_deployment(self, namespace: str, name: str) -> object: ...

    async def create_event(self, namespace: str, event: dict[str, object]) -> None: ...

    async def close(self) -> None: ...


def failure_of(error: BaseException) -> ReadFailure:
    """Name a failed call: HTTP status first, then the transport, then anything else."""
    if isinstance(error, ReadFailure):
        return error
    status = _http_status(error)
    if status is not None:
        detail = f"HTTP {status}: {_message(error)}"
        if status in (401, 403):
            return ReadFailure(UnavailableReason.FORBIDDEN, detail)
        if status == 404:
            return ReadFailure(UnavailableReason.NOT_FOUND, detail)
        return ReadFailure(UnavailableReason.ERROR, detail)
    if isinstance(error, httpx2.TimeoutException):
        return ReadFailure(UnavailableReason.TIMEOUT, f"client timeout: {_describe(error)}")
    if isinstance(error, httpx2.TransportError):
        return ReadFailure(
            UnavailableReason.ERROR, f"cannot reach the API server: {_describe(error)}"
        )
    return ReadFailure(UnavailableReason.ERROR, _describe(error))


def _http_status(error: BaseException) -> int | None:
    if isinstance(error, ApiError) and error.status is not None and error.status.code:
        return int(error.status.code)
    if isinstance(error, httpx2.HTTPStatusError):
        return int(error.response.status_code)
    return None


def _message(error: BaseException) -> str:
    if isinstance(error, ApiError) and error.status is not None and error.status.message:
        return str(error.status.message)
    if isinstance(error, httpx2.HTTPStatusError):
        return error.response.reason_phrase or "no message"
    return str(error)


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def load_kube_config(kubeconfig: Path | None = None, context: str | None = None) -> KubeConfig:
    """An explicit kubeconfig wins; else in-cluster; else $KUBECONFIG / ~/.kube/config."""
    if kubeconfig is not None:
        return KubeConfig.from_file(kubeconfig)
    return KubeConfig.from_env()


class LightkubeReader:
    """:class:`ClusterReader` over a lightkube AsyncClient (its URL, auth, TLS and pool)."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        # lightkube's request builder; its methods are untyped.
        self._generic: Any = client._client

    @classmethod
    def open(
        cls,
        kubeconfig: Path | None = None,
        context: str | None = None,
        *,
        timeout_seconds: float = 10.0,
    ) -> LightkubeReader:
        """A reader on a new client; raises ReadFailure(error) when there is no usable config."""
        try:
            config = load_kube_config(kubeconfig, context).get(context_name=context)
            client = AsyncClient(
                config,
                timeout=httpx2.Timeout(max(timeout_seconds, 0.001)),
                field_manager=FIELD_MANAGER,
            )
        except (ConfigError, OSError, ValueError, KeyError) as error:
            raise ReadFailure(
                UnavailableReason.ERROR, f"no usable Kubernetes configuration: {_describe(error)}"
            ) from error
        return cls(client)

    async def _send(self, method: str, resource: type[Resource], **kwargs: Any) -> object:
        try:
            request = self._generic.prepare_request(method, res=resource, **kwargs)
            response = await self._generic.send(self._generic.build_adapter_request(request))
            self._generic.raise_for_status(response)
            return json.loads(response.content)
        except ReadFailure:
            raise
        except Exception as error:
            raise failure_of(error) from error

    async def get_pod(self, namespace: str, name: str) -> object:
        return await self._send("get", Pod, name=name, namespace=namespace)

    async def list_events(self, namespace: str, field_selector: str) -> object:
        params = {"fieldSelector": field_selector, "limit": EVENTS_PAGE_LIMIT}
        return await self._send("list", Event, namespace=namespace, params=params)

    async def get_node(self, name: str) -> object:
        return await self._send("get", Node, name=name)

    async def get_replicaset(self, namespace: str, name: str) -> object:
        return await self._send("get", ReplicaSet, name=name, namespace=namespace)

    async def get_deployment(self, namespace: str, name: str) -> object:
        return await self._send("get", Deployment, name=name, namespace=namespace)

    async def create_event(self, namespace: str, event: dict[str, object]) -> None:
        try:
            await self.client.create(cast(Event, Event.from_dict(event)))
        except Exception as error:
            raise failure_of(error) from error

    async def close(self) -> None:
        await self.client.close()
