"""A small HTTPS client for a few Kubernetes API calls, on the standard library alone.

For a process that makes a handful of calls and exits (the termination-cause detector runs
inside a pod's grace period, where lightkube's and httpx's imports cost more than the
calls): `ssl`, asyncio streams and `json`, nothing else loaded.  One SSLContext per client;
HTTP/1.1 keep-alive, a call taking an idle connection or opening one, so concurrent calls
run on connections of their own (one that hangs holds up no other) and later calls reuse
them.  Bodies are decoded JSON.

Configuration is kube/kubeconfig.py's (the same sources and order as the lightkube client):
the cluster's `server`, `certificate-authority[-data]`, `insecure-skip-tls-verify`,
`tls-server-name`; the user's `token`, `tokenFile` (read when first needed and again after
a 401, then the call is retried once: a rotated service-account token), `client-
certificate[-data]`/`client-key[-data]`, `username`/`password`, `exec` (the credential
plugin, run when first needed and again after a 401).  `auth-provider` and proxies are not
supported.

Errors: `ApiError` for an HTTP answer of 400 or more (its status and the Status message),
`TimeoutError` when a call outlives the client's timeout, `OSError`/`EOFError`/`HttpError`
when the server cannot be reached or answers something that is not HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from graceful_drain.kube.kubeconfig import ClusterAccess, KubeconfigError, load_document, resolve
from graceful_drain.kube.meta import HTTP_UNAUTHORIZED

DEFAULT_TIMEOUT_SECONDS = 10.0
USER_AGENT = "graceful-drain"
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1")

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class ApiError(Exception):
    """The API server answered `status` (>= 400); `message` is its Status's, if any."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message


class HttpError(Exception):
    """An answer that is not HTTP/1.1 as the client reads it."""


def _pem(data: str) -> str:
    return base64.b64decode(data).decode("ascii")


def _load_cert_chain(context: ssl.SSLContext, access: ClusterAccess) -> None:
    user = access.user
    cert_data, key_data = user.get("client-certificate-data"), user.get("client-key-data")
    if cert_data or key_data:
        import tempfile  # only for inline client certificates: load_cert_chain reads files

        with tempfile.TemporaryDirectory() as folder:
            cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
            cert.write_text(_pem(cert_data) if cert_data else "")
            key.write_text(_pem(key_data) if key_data else "")
            if not cert_data:
                cert = access.file(str(user.get("client-certificate")))
            if not key_data:
                key = access.file(str(user.get("client-key")))
            context.load_cert_chain(cert, key)
    elif user.get("client-certificate"):
        context.load_cert_chain(
            access.file(str(user["client-certificate"])),
            access.file(str(user.get("client-key") or user["client-certificate"])),
        )


def tls_context(access: ClusterAccess) -> ssl.SSLContext:
    """The one SSLContext of a client: the cluster's CA (else the system's), the user's
    client certificate if any."""
    cluster = access.cluster
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if cluster.get("insecure-skip-tls-verify") is True:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        context.load_verify_locations(cadata=_pem(str(cluster["certificate-authority-data"])))
    elif cluster.get("certificate-authority"):
        context.load_verify_locations(cafile=access.file(str(cluster["certificate-authority"])))
    else:
        context.load_default_certs()
    _load_cert_chain(context, access)
    return context


class _Credentials:
    """The Authorization header: static, or re-read (token file, exec plugin) after a 401."""

    def __init__(self, access: ClusterAccess) -> None:
        user = access.user
        if user.get("auth-provider"):
            raise KubeconfigError("auth-provider not supported")
        self._access = access
        self._header: str | None = None
        self._token_file = access.file(str(user["tokenFile"])) if user.get("tokenFile") else None
        self._exec = user.get("exec") if isinstance(user.get("exec"), Mapping) else None
        self.renewable = self._token_file is not None or self._exec is not None
        if not self.renewable:
            if user.get("token"):
                self._header = f"Bearer {user['token']}"
            elif user.get("username") and user.get("password"):
                pair = f"{user['username']}:{user['password']}".encode()
                self._header = f"Basic {base64.b64encode(pair).decode('ascii')}"
        self._lock = asyncio.Lock()

    async def header(self, *, renew: bool = False) -> str | None:
        if not self.renewable:
            return self._header
        async with self._lock:
            if self._header is None or renew:
                self._header = f"Bearer {await self._token()}"
            return self._header

    async def _token(self) -> str:
        if self._token_file is not None:
            return self._token_file.read_text().strip()
        assert self._exec is not None
        return await _exec_token(self._exec)


async def _exec_token(spec: Mapping[str, Any]) -> str:
    """A kubectl credential plugin's token (client.authentication.k8s.io ExecCredential)."""
    if spec.get("apiVersion") not in (*EXEC_API_VERSIONS, "client.authentication.k8s.io/v1alpha1"):
        raise KubeconfigError(f"auth exec api version {spec.get('apiVersion')} not implemented")
    import os

    env = dict(os.environ)
    env.update({str(e["name"]): str(e["value"]) for e in spec.get("env") or ()})
    process = await asyncio.create_subprocess_exec(
        str(spec["command"]), *map(str, spec.get("args") or ()), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    if process.returncode != 0:
        raise KubeconfigError(f"exec {spec['command']} returned {process.returncode}: {err!r}")
    return str(json.loads(out)["status"]["token"])


class RestClient:
    """GET and POST JSON on one API server; see the module docstring."""

    def __init__(self, access: ClusterAccess, *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS):
        parts = urlsplit(access.server)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise KubeconfigError(f"server {access.server!r} is not an http(s) URL")
        self.access = access
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self._authority = parts.netloc.rpartition("@")[2]
        self._tls = tls_context(access) if parts.scheme == "https" else None
        server_name = access.cluster.get("tls-server-name")
        self._server_name = str(server_name) if server_name else self._host
        self._credentials = _Credentials(access)
        self._timeout = timeout_seconds
        self._idle: list[Streams] = []
        self._busy: set[asyncio.StreamWriter] = set()

    @classmethod
    def open(
        cls,
        kubeconfig: Path | None = None,
        context: str | None = None,
        *,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> RestClient:
        """A client on kube/kubeconfig.py's configuration; KubeconfigError (or OSError,
        ValueError, ssl.SSLError) when there is none usable."""
        return cls(resolve(load_document(kubeconfig), context), timeout_seconds=timeout_seconds)

    async def get(self, path: str, params: Mapping[str, str | int | None] | None = None) -> Any:
        """GET `path` (its segments already quoted) with `params` as its query."""
        query = urlencode({k: v for k, v in (params or {}).items() if v is not None})
        return await self.request("GET", f"{path}?{query}" if query else path)

    async def post(self, path: str, body: object) -> Any:
        return await self.request("POST", path, json.dumps(body).encode())

    async def request(self, method: str, path: str, body: bytes | None = None) -> Any:
        """One call within the client's timeout; the decoded JSON body (None if empty)."""
        async with asyncio.timeout(self._timeout):
            status, reason, content = await self._call(method, path, body)
            if status == HTTP_UNAUTHORIZED and self._credentials.renewable:
                await self._credentials.header(renew=True)
                status, reason, content = await self._call(method, path, body)
        if status >= 400:
            raise ApiError(status, reason, _status_message(content))
        return json.loads(content) if content else None

    async def _call(self, method: str, path: str, body: bytes | None) -> tuple[int, str, bytes]:
        authorization = await self._credentials.header()
        lines = [
            f"{method} {self._prefix}{path} HTTP/1.1",  # path and query quoted by the caller
            f"Host: {self._authority}",
            f"User-Agent: {USER_AGENT}",
            "Accept: application/json",
        ]
        if authorization is not None:
            lines.append(f"Authorization: {authorization}")
        if body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        message = ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")
        while self._idle:  # a kept-alive connection the server may have closed meanwhile
            streams = self._idle.pop()
            try:
                return await self._exchange(streams, message, retry_stale=True)
            except _Stale:
                continue
        return await self._exchange(await self._connect(), message, retry_stale=False)

    async def _connect(self) -> Streams:
        if self._tls is None:
            return await asyncio.open_connection(self._host, self._port)
        return await asyncio.open_connection(
            self._host, self._port, ssl=self._tls, server_hostname=self._server_name
        )

    async def _exchange(
        self, streams: Streams, message: bytes, *, retry_stale: bool
    ) -> tuple[int, str, bytes]:
        reader, writer = streams
        self._busy.add(writer)
        keep = False
        try:
            writer.write(message)
            await writer.drain()
            status_line = await reader.readline()
            if not status_line and retry_stale:
                raise _Stale
            status, reason, keep, content = await _read_response(status_line, reader)
            return status, reason, content
        except (ConnectionError, asyncio.IncompleteReadError) as error:
            if retry_stale:
                raise _Stale from error
            raise
        finally:
            self._busy.discard(writer)
            if keep:
                self._idle.append(streams)
            else:
                writer.transport.abort()

    async def close(self) -> None:
        """Drop every connection at once (an abort: no close_notify waited for)."""
        for _, writer in self._idle:
            writer.transport.abort()
        for writer in self._busy:
            writer.transport.abort()
        self._idle.clear()
        self._busy.clear()


class _Stale(Exception):
    """A kept-alive connection the server had closed: the call goes on a new one."""


async def _read_response(
    status_line: bytes, reader: asyncio.StreamReader
) -> tuple[int, str, bool, bytes]:
    """status, reason, whether the connection may be kept, the body."""
    version, _, rest = status_line.rstrip(b"\r\n").partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or not code.isdigit():
        raise HttpError(f"not an HTTP/1.1 status line: {status_line[:80]!r}")
    headers: dict[bytes, bytes] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n"):
        if not line:
            raise asyncio.IncompleteReadError(b"", None)
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    keep = headers.get(b"connection", b"").lower() != b"close" and version == b"HTTP/1.1"
    if code in (b"204", b"304"):  # never a body
        content = b""
    elif b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        content = await _read_chunked(reader)
    elif b"content-length" in headers:
        content = await reader.readexactly(int(headers[b"content-length"]))
    else:
        content, keep = await reader.read(), False
    return int(code), reason.decode("latin-1"), keep, content


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    while True:
        size = int((await reader.readline()).split(b";", 1)[0].strip() or b"x", 16)
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)  # the chunk's CRLF


def _status_message(content: bytes) -> str:
    """The `message` of a Status body, else the body's start."""
    try:
        document = json.loads(content)
    except ValueError:
        return content[:200].decode("utf-8", "replace")
    if isinstance(document, dict) and isinstance(document.get("message"), str):
        return str(document["message"])
    return content[:200].decode("utf-8", "replace")
