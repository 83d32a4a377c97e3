"""The detector's few API calls, as raw JSON, with every failure named as evidence.

:class:`ClusterReader` is what the collectors need; :class:`LightkubeReader` implements
it over the project's shared access layer (:mod:`graceful_drain.kube.client`: a lightkube
async client from an explicit kubeconfig, else the in-cluster service account, else
$KUBECONFIG; raw-JSON reads).  Reads return decoded JSON, for the tolerant
``from_object`` parsers in :mod:`graceful_drain.termination.evidence`.  Every failure
is raised as a :class:`ReadFailure` carrying the :class:`Unavailable` it stands for:
401/403 → forbidden, 404 → not_found, a client-side timeout → timeout, anything
else → error.

Reads never send ``resourceVersion``, so the API server answers from etcd with a quorum
read, not from its watch cache (``resourceVersion=0`` could return a pod from before
the deletion that is the reason we are asking).
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Protocol, TypeVar, cast

import httpx2
from lightkube import AsyncClient, ConfigError
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Event, Node, Pod

from graceful_drain.kube.client import RawApi, create_client, decode, http_status
from graceful_drain.kube.meta import HTTP_NOT_ALLOWED, HTTP_NOT_FOUND
from graceful_drain.termination.evidence import Unavailable, UnavailableReason

T = TypeVar("T")
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
    status = http_status(error)
    if status is not None:
        detail = f"HTTP {status}: {_message(error)}"
        if status in HTTP_NOT_ALLOWED:
            return ReadFailure(UnavailableReason.FORBIDDEN, detail)
        if status == HTTP_NOT_FOUND:
            return ReadFailure(UnavailableReason.NOT_FOUND, detail)
        return ReadFailure(UnavailableReason.ERROR, detail)
    if isinstance(error, httpx2.TimeoutException):
        return ReadFailure(UnavailableReason.TIMEOUT, f"client timeout: {_describe(error)}")
    if isinstance(error, httpx2.TransportError):
        return ReadFailure(
            UnavailableReason.ERROR, f"cannot reach the API server: {_describe(error)}"
        )
    return ReadFailure(UnavailableReason.ERROR, _describe(error))


def _message(error: BaseException) -> str:
    if isinstance(error, ApiError) and error.status is not None and error.status.message:
        return str(error.status.message)
    if isinstance(error, httpx2.HTTPStatusError):
        return error.response.reason_phrase or "no message"
    return str(error)


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class LightkubeReader:
    """:class:`ClusterReader` over a lightkube AsyncClient and the shared RawApi."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._raw = RawApi(client)

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
            client = create_client(kubeconfig, context, timeout_seconds=max(timeout_seconds, 0.001))
        except (ConfigError, OSError, ValueError, KeyError) as error:
            raise ReadFailure(
                UnavailableReason.ERROR, f"no usable Kubernetes configuration: {_describe(error)}"
            ) from error
        return cls(client)

    async def get_pod(self, namespace: str, name: str) -> object:
        return await _failing_as_evidence(self._raw.get(Pod, name, namespace))

    async def list_events(self, namespace: str, field_selector: str) -> object:
        page = await _failing_as_evidence(
            self._raw.list_page(
                Event, namespace, limit=EVENTS_PAGE_LIMIT, field_selector=field_selector
            )
        )
        return [decode(item) for item in page.items]

    async def get_node(self, name: str) -> object:
        return await _failing_as_evidence(self._raw.get(Node, name, None))

    async def get_replicaset(self, namespace: str, name: str) -> object:
        return await _failing_as_evidence(self._raw.get(ReplicaSet, name, namespace))

    async def get_deployment(self, namespace: str, name: str) -> object:
        return await _failing_as_evidence(self._raw.get(Deployment, name, namespace))

    async def create_event(self, namespace: str, event: dict[str, object]) -> None:
        await _failing_as_evidence(self.client.create(cast(Event, Event.from_dict(event))))

    async def close(self) -> None:
        await self.client.close()


async def _failing_as_evidence(call: Awaitable[T]) -> T:
    try:
        return await call
    except Exception as error:
        raise failure_of(error) from error
