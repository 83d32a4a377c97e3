"""The lightkube client factory, and raw-JSON reads over lightkube's request builder.

`create_client` reads the configuration kube/kubeconfig.py picks: an explicit kubeconfig
(and context), else the in-cluster service account, else $KUBECONFIG / ~/.kube/config.

`RawApi` lists, watches and gets objects as plain JSON (dicts) instead of lightkube models:
the informer turns each object into a slim view at once and drops the JSON, and decoding into
dicts costs a fraction of building a full model (bench/decode.py). It builds its
requests with lightkube's own GenericAsyncClient (URL, auth, TLS, connection pool), so there is
one HTTP stack; only the bodies are decoded here, with msgspec like lightkube itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import msgspec
from lightkube import AsyncClient, ConfigError
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.core.exceptions import ApiError
from lightkube.core.resource import Resource

from graceful_drain.kube.kubeconfig import KubeconfigError, load_document
from graceful_drain.kube.meta import HTTP_GONE

FIELD_MANAGER = "graceful-drain"
DEFAULT_TIMEOUT_SECONDS = 10.0

JsonDict = dict[str, Any]


def load_config(kubeconfig: Path | None = None, context: str | None = None) -> SingleConfig:
    """An explicit kubeconfig (context) wins; else in-cluster; else $KUBECONFIG/~/.kube/config."""
    try:
        document = load_document(kubeconfig)
    except KubeconfigError as error:
        raise ConfigError(str(error)) from error
    config = KubeConfig.from_dict(dict(document.content), fname=document.path).get(
        context_name=context
    )
    if config is None:
        raise ConfigError(f"no usable context in the Kubernetes configuration ({kubeconfig})")
    return config


def create_client(
    kubeconfig: Path | None = None,
    context: str | None = None,
    *,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> AsyncClient:
    return AsyncClient(
        load_config(kubeconfig, context),
        timeout=httpx2.Timeout(timeout_seconds),
        field_manager=FIELD_MANAGER,
    )


def http_status(error: BaseException) -> int | None:
    """The HTTP status of a failed API call, or None when no HTTP answer came back."""
    if isinstance(error, ApiError) and error.status is not None and error.status.code:
        return int(error.status.code)
    if isinstance(error, httpx2.HTTPStatusError):
        return int(error.response.status_code)
    return None


def status_message(error: BaseException) -> str | None:
    """The `message` of the Status a failed API call answered, or None without one."""
    if isinstance(error, ApiError) and error.status is not None:
        return error.status.message
    return None


def error_detail(error: BaseException) -> str:
    if isinstance(error, ApiError) and error.status is not None:
        return f"{error.status.code} {error.status.reason}: {error.status.message}"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class WatchGone(Exception):
    """410 Gone: the watch's resourceVersion is too old; the informer must re-list."""


class WatchFailed(Exception):
    """The watch stream carried an ERROR event other than 410."""

    def __init__(self, code: int | None, message: str) -> None:
        super().__init__(f"watch error {code}: {message}")
        self.code = code


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_: str = msgspec.field(name="continue", default="")


class _RawList(msgspec.Struct):
    items: list[msgspec.Raw] | None = None
    metadata: _ListMeta | None = None


class _RawEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _StatusView(msgspec.Struct):
    code: int | None = None
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class RawListPage:
    resource_version: str
    continue_token: str
    items: list[msgspec.Raw]  # decode one at a time with `decode`, so a page is never all dicts


@dataclass(frozen=True, slots=True)
class RawWatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: JsonDict


_decode_any = msgspec.json.Decoder()
_decode_list = msgspec.json.Decoder(_RawList)
_decode_event = msgspec.json.Decoder(_RawEvent)
_decode_status = msgspec.json.Decoder(_StatusView)


def decode(raw: msgspec.Raw | bytes) -> Any:
    return _decode_any.decode(raw)


class RawApi:
    """get/list/watch returning JSON dicts, over an AsyncClient's connection."""

    def __init__(self, client: AsyncClient) -> None:
        # lightkube's request builder; its methods are untyped, hence Any.
        self._generic: Any = client._client

    async def _send(self, method: str, resource: type[Resource], **kwargs: Any) -> bytes:
        request = self._generic.prepare_request(method, res=resource, **kwargs)
        response = await self._generic.send(self._generic.build_adapter_request(request))
        self._generic.raise_for_status(response)
        return bytes(response.content)

    async def get(self, resource: type[Resource], name: str, namespace: str | None) -> JsonDict:
        """The object as JSON. Raises lightkube ApiError (e.g. 404) or an httpx error."""
        body = await self._send("get", resource, name=name, namespace=namespace)
        document = decode(body)
        if not isinstance(document, dict):
            raise ValueError(f"GET {resource.__name__} {name}: the body is not a JSON object")
        return document

    async def list_page(
        self,
        resource: type[Resource],
        namespace: str | None,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        field_selector: str | None = None,
    ) -> RawListPage:
        body = await self._send(
            "list",
            resource,
            namespace=namespace,
            params={
                "limit": limit,
                "continue": continue_token or None,
                "fieldSelector": field_selector,
            },
        )
        decoded = _decode_list.decode(body)
        meta = decoded.metadata or _ListMeta()
        return RawListPage(meta.resourceVersion, meta.continue_, decoded.items or [])

    async def watch(
        self,
        resource: type[Resource],
        namespace: str | None,
        *,
        resource_version: str,
        timeout_seconds: int,
        read_timeout: float,
        field_selector: str | None = None,
    ) -> AsyncIterator[RawWatchEvent]:
        """One watch request from `resource_version`, bookmarks on, until the server ends it.

        Raises WatchGone on 410 (as an HTTP status or an ERROR event), WatchFailed on any
        other ERROR event, and lightkube/httpx errors for the request itself.
        """
        request = self._generic.prepare_request(
            "list",
            res=resource,
            namespace=namespace,
            watch=True,
            params={
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(timeout_seconds),
                "fieldSelector": field_selector,
            },
        )
        request.timeout = httpx2.Timeout(DEFAULT_TIMEOUT_SECONDS, read=read_timeout)
        response = await self._generic.send(
            self._generic.build_adapter_request(request), stream=True
        )
        try:
            if response.status_code == HTTP_GONE:
                raise WatchGone("410 Gone when starting the watch")
            if response.status_code >= 400:
                await response.aread()
            self._generic.raise_for_status(response)
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                event = _decode_event.decode(line)
                if event.type == "ERROR":
                    status = _decode_status.decode(event.object)
                    if status.code == HTTP_GONE:
                        raise WatchGone(status.message or "410 Gone")
                    raise WatchFailed(status.code, status.message or status.reason)
                obj = decode(event.object)
                if isinstance(obj, dict):
                    yield RawWatchEvent(event.type, obj)
        finally:
            await response.aclose()
