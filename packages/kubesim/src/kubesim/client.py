"""A small raw-JSON Kubernetes REST client for kubesim's own controllers and drain clients.

kubesim's controllers talk to the API server over HTTP like the real ones do, but on plain
dicts: no model classes between them and the wire. A client of any API server speaks HTTPS
(`KubeClient(url, token, ca_pem)`) through aiohttp; kubesim's own in-process components
speak plain HTTP on its private Unix socket instead (`KubeSim.local_client`), through the
lean client in `socket_http` (aiohttp's client machinery cost more CPU than the server's
work on each of their requests).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from kubesim import jsoncodec
from kubesim.socket_http import UnixHTTPClient, request_target
from kubesim.types import Obj

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class ApiStatusError(Exception):
    """The server answered with a non-2xx status; `status` is its Status body."""

    def __init__(self, code: int, status: Obj) -> None:
        super().__init__(f"{code} {status.get('reason', '')}: {status.get('message', '')}")
        self.code = code
        self.status = status

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", ""))


def resource_path(
    api_version: str, plural: str, namespace: str | None = None, name: str | None = None,
    subresource: str | None = None,
) -> str:  # fmt: skip
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    path = base
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{plural}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


class KubeClient:
    def __init__(
        self, server: str, token: str, ca_pem: bytes | None,
        user_agent: str = "kubesim-controller", *, unix_socket: str | None = None,
    ) -> None:  # fmt: skip
        """HTTPS to `server`, trusting `ca_pem`; or, with `unix_socket` (and no CA), plain
        HTTP on that socket (`server` then only names the Host header)."""
        if (ca_pem is None) == (unix_socket is None):
            raise ValueError("a KubeClient needs either a CA bundle (HTTPS) or a Unix socket")
        self.server = server.rstrip("/")
        self._ssl = None if ca_pem is None else ssl.create_default_context(cadata=ca_pem.decode())
        self._unix_socket = unix_socket
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            "User-Agent": user_agent,
        }
        self._session: aiohttp.ClientSession | None = None
        self._local: UnixHTTPClient | None = None  # made on first use, in the running loop

    def _connector(self) -> aiohttp.BaseConnector:
        if self._unix_socket is not None:
            return aiohttp.UnixConnector(self._unix_socket, limit=64)
        assert self._ssl is not None  # one of the two is set: see __init__
        return aiohttp.TCPConnector(ssl=self._ssl, limit=64)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                connector=self._connector(),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        return self._session

    @property
    def _socket_http(self) -> UnixHTTPClient:
        assert self._unix_socket is not None
        if self._local is None:
            host = urlsplit(self.server).netloc
            self._local = UnixHTTPClient(self._unix_socket, host, self._headers)
        return self._local

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._local is not None:
            await self._local.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        request_timeout: float = 30.0,
    ) -> Obj:
        data = None if body is None else jsoncodec.dumps(body)
        if self._unix_socket is not None:
            answer = await self._socket_http.request(
                method, request_target(path, params), data, content_type, request_timeout
            )
            return _parsed(answer.status, answer.body)
        headers = {"Content-Type": content_type} if data is not None else None
        async with self.session.request(
            method, self.server + path, data=data, params=params, headers=headers,
            timeout=aiohttp.ClientTimeout(total=request_timeout),
        ) as response:  # fmt: skip
            return _parsed(response.status, await response.read())

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        return await self.request("GET", path, params=params)

    async def create(self, path: str, body: Obj) -> Obj:
        return await self.request("POST", path, body)

    async def replace(self, path: str, body: Obj) -> Obj:
        return await self.request("PUT", path, body)

    async def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH) -> Obj:
        return await self.request("PATCH", path, body, content_type=content_type)

    async def delete(self, path: str, options: Obj | None = None) -> Obj:
        return await self.request("DELETE", path, options)

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 300,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Obj]:  # fmt: skip
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            **(params or {}),
        }
        if self._unix_socket is not None:
            stream = await self._socket_http.stream(
                request_target(path, query), idle_timeout=timeout_seconds + 30
            )
            try:
                if stream.status >= 400:
                    raw = await stream.read()
                    raise ApiStatusError(stream.status, jsoncodec.loads(raw) if raw else {})
                async for line in stream.lines():
                    if line.strip():
                        yield jsoncodec.loads(line)
            finally:
                stream.close()
            return
        async with self.session.get(
            self.server + path, params=query,
            timeout=aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 30),
        ) as response:  # fmt: skip
            if response.status >= 400:
                raw = await response.read()
                raise ApiStatusError(response.status, jsoncodec.loads(raw) if raw else {})
            async for line in response.content:
                if line.strip():
                    yield jsoncodec.loads(line)


def _parsed(status: int, raw: bytes) -> Obj:
    """The answer's JSON body; an error status raises `ApiStatusError` with it."""
    try:
        parsed: Obj = jsoncodec.loads(raw) if raw else {}
    except ValueError:
        parsed = {"message": raw.decode(errors="replace")}
    if status >= 400:
        raise ApiStatusError(status, parsed)
    return parsed
