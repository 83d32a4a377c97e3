"""The detector's few API calls, as raw JSON, with every failure named as evidence.

:class:`ClusterReader` is what the collectors need; :class:`RestReader` implements it over
the lean client (:mod:`graceful_drain.kube.rest`: the standard library's ``ssl`` and
asyncio streams, no lightkube or httpx to import inside the grace period), configured as
every client of the project is (:mod:`graceful_drain.kube.kubeconfig`: an explicit
kubeconfig, else the in-cluster service account, else $KUBECONFIG).  Reads return decoded
JSON, for the tolerant ``from_object`` parsers in :mod:`graceful_drain.termination.evidence`.
Every failure is raised as a :class:`ReadFailure` carrying the :class:`Unavailable` it
stands for: 401/403 → forbidden, 404 → not_found, a client-side timeout → timeout,
anything else → error.

Reads never send ``resourceVersion``, so the API server answers from etcd with a quorum
read, not from its watch cache (``resourceVersion=0`` could return a pod from before
the deletion that is the reason we are asking).
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Protocol, TypeVar
from urllib.parse import quote

from graceful_drain.kube.kubeconfig import KubeconfigError
from graceful_drain.kube.meta import HTTP_NOT_ALLOWED, HTTP_NOT_FOUND
from graceful_drain.kube.rest import ApiError, HttpError, RestClient
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
    if isinstance(error, ApiError):
        detail = f"HTTP {error.status}: {error.message or error.reason or 'no message'}"
        if error.status in HTTP_NOT_ALLOWED:
            return ReadFailure(UnavailableReason.FORBIDDEN, detail)
        if error.status == HTTP_NOT_FOUND:
            return ReadFailure(UnavailableReason.NOT_FOUND, detail)
        return ReadFailure(UnavailableReason.ERROR, detail)
    if isinstance(error, TimeoutError):
        return ReadFailure(UnavailableReason.TIMEOUT, f"client timeout: {_describe(error)}")
    if isinstance(error, OSError | EOFError | HttpError):
        return ReadFailure(
            UnavailableReason.ERROR, f"cannot reach the API server: {_describe(error)}"
        )
    return ReadFailure(UnavailableReason.ERROR, _describe(error))


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _namespaced(group: str, namespace: str, plural: str, name: str = "") -> str:
    path = f"{group}/namespaces/{quote(namespace, safe='')}/{plural}"
    return f"{path}/{quote(name, safe='')}" if name else path


CORE, APPS = "/api/v1", "/apis/apps/v1"


class RestReader:
    """:class:`ClusterReader` over the lean client."""

    def __init__(self, client: RestClient) -> None:
        self.client = client

    @classmethod
    def open(
        cls,
        kubeconfig: Path | None = None,
        context: str | None = None,
        *,
        timeout_seconds: float = 10.0,
    ) -> RestReader:
        """A reader on a new client; raises ReadFailure(error) when there is no usable config."""
        try:
            client = RestClient.open(
                kubeconfig, context, timeout_seconds=max(timeout_seconds, 0.001)
            )
        except (KubeconfigError, OSError, ValueError, KeyError, TypeError) as error:
            raise ReadFailure(
                UnavailableReason.ERROR, f"no usable Kubernetes configuration: {_describe(error)}"
            ) from error
        return cls(client)

    async def get_pod(self, namespace: str, name: str) -> object:
        path = _namespaced(CORE, namespace, "pods", name)
        return await _failing_as_evidence(self.client.get(path))

    async def list_events(self, namespace: str, field_selector: str) -> object:
        """The EventList as answered (the evidence parser checks its ``items``)."""
        params: dict[str, str | int | None] = {
            "limit": EVENTS_PAGE_LIMIT,
            "fieldSelector": field_selector,
        }
        path = _namespaced(CORE, namespace, "events")
        return await _failing_as_evidence(self.client.get(path, params))

    async def get_node(self, name: str) -> object:
        return await _failing_as_evidence(self.client.get(f"{CORE}/nodes/{quote(name, safe='')}"))

    async def get_replicaset(self, namespace: str, name: str) -> object:
        path = _namespaced(APPS, namespace, "replicasets", name)
        return await _failing_as_evidence(self.client.get(path))

    async def get_deployment(self, namespace: str, name: str) -> object:
        path = _namespaced(APPS, namespace, "deployments", name)
        return await _failing_as_evidence(self.client.get(path))

    async def create_event(self, namespace: str, event: dict[str, object]) -> None:
        await _failing_as_evidence(self.client.post(_namespaced(CORE, namespace, "events"), event))

    async def close(self) -> None:
        await self.client.close()


async def _failing_as_evidence(call: Awaitable[T]) -> T:
    try:
        return await call
    except Exception as error:
        raise failure_of(error) from error
