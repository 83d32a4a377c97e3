"""A loopback HTTP server that answers as scripted, for the lean client (kube/rest.py) and
the detector's reader: requests as the API server would see them, by connection."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from graceful_drain.kube.kubeconfig import ClusterAccess
from graceful_drain.kube.rest import RestClient


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    connection: int  # which accepted connection carried it


Answer = Callable[[Seen], bytes | None]  # the raw HTTP response; None: never answer


def response(status: int, body: object, *, chunked: bool = False, close: bool = False) -> bytes:
    content = json.dumps(body).encode()
    head = [f"HTTP/1.1 {status} X", "Content-Type: application/json"]
    if close:
        head.append("Connection: close")
    if chunked:
        half = len(content) // 2
        chunks = b"".join(
            f"{len(part):x};ext=1\r\n".encode() + part + b"\r\n"
            for part in (content[:half], content[half:])
            if part
        )
        return ("\r\n".join([*head, "Transfer-Encoding: chunked"]) + "\r\n\r\n").encode() + (
            chunks + b"0\r\nTrailer: x\r\n\r\n"
        )
    return ("\r\n".join([*head, f"Content-Length: {len(content)}"]) + "\r\n\r\n").encode() + content


@dataclass
class Server:
    answer: Answer
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    url: str = ""
    close_after_each: bool = False  # drop the connection after answering, without saying so
    release: asyncio.Event = field(default_factory=asyncio.Event)  # ends unanswered calls

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while line := await reader.readline():
                method, target, _ = line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while (header := await reader.readline()) != b"\r\n":
                    name, _, value = header.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                seen = Seen(method, target, headers, body, number)
                self.seen.append(seen)
                answer = self.answer(seen)
                if answer is None:
                    await self.release.wait()
                    break
                writer.write(answer)
                await writer.drain()
                if self.close_after_each:
                    break
        finally:
            writer.close()


@asynccontextmanager
async def serving(answer: Answer, tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    """The server on a loopback port, over TLS with `tls` (a server context)."""
    server = Server(answer)
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=tls)
    port = listening.sockets[0].getsockname()[1]
    server.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    async with listening:
        yield server


def client(server: Server, user: dict[str, object] | None = None, **kw: float) -> RestClient:
    access = ClusterAccess("ctx", "shop", server.url + "/prefix", {"server": server.url},
                           user if user is not None else {"token": "t0"}, None)  # fmt: skip
    return RestClient(access, **kw)
