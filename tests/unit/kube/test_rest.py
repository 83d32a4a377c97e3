"""The lean client (kube/rest.py) against a loopback HTTP server that answers as scripted:
requests as the API server sees them, bodies whole (by length or chunked), connections
kept alive and reused, a stale one replaced, a rotated token re-read after a 401."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import sys
from pathlib import Path

import pytest

from graceful_drain.kube.kubeconfig import ClusterAccess, in_cluster_document, resolve
from graceful_drain.kube.rest import ApiError, HttpError, RestClient, tls_context
from kubesim.pki import CertificateAuthority
from tests.unit.kube.loopback_http import Seen, client, response, serving


async def test_a_get_is_sent_as_the_api_server_reads_it() -> None:
    async with serving(lambda seen: response(200, {"kind": "Pod"})) as server:
        api = client(server)
        try:
            got = await api.get("/api/v1/namespaces/shop/events",
                                {"fieldSelector": "involvedObject.uid=u1", "limit": 500,
                                 "continue": None})  # fmt: skip
        finally:
            await api.close()
    assert got == {"kind": "Pod"}
    [seen] = server.seen
    assert (seen.method, seen.target) == (
        "GET",
        "/prefix/api/v1/namespaces/shop/events?fieldSelector=involvedObject.uid%3Du1&limit=500",
    )
    assert seen.headers["authorization"] == "Bearer t0"
    assert seen.headers["host"] == server.url.removeprefix("http://")


async def test_a_post_carries_its_json_body() -> None:
    async with serving(lambda seen: response(201, json.loads(seen.body))) as server:
        api = client(server)
        try:
            got = await api.post("/api/v1/namespaces/shop/events", {"reason": "R"})
        finally:
            await api.close()
    assert got == {"reason": "R"}
    assert server.seen[0].headers["content-type"] == "application/json"


@pytest.mark.parametrize("chunked", [False, True])
async def test_calls_in_turn_reuse_one_connection(chunked: bool) -> None:
    big = {"items": [{"n": i} for i in range(2000)]}
    async with serving(lambda seen: response(200, big, chunked=chunked)) as server:
        api = client(server)
        try:
            for _ in range(3):
                assert await api.get("/x") == big
        finally:
            await api.close()
    assert server.connections == 1
    assert [s.connection for s in server.seen] == [1, 1, 1]


async def test_calls_at_once_each_have_a_connection_and_a_hang_holds_up_no_other() -> None:
    def answer(seen: Seen) -> bytes | None:
        return None if seen.target.endswith("/hang") else response(200, {"path": seen.target})

    async with serving(answer) as server:
        api = client(server)
        hang = asyncio.create_task(api.get("/hang"))
        try:
            got = await asyncio.gather(api.get("/a"), api.get("/b"))
            assert not hang.done()  # the server never answers it
        finally:
            hang.cancel()
            server.release.set()
            await api.close()
    assert [g["path"] for g in got] == ["/prefix/a", "/prefix/b"]
    assert len({s.connection for s in server.seen}) == 3


async def test_a_connection_the_server_closed_is_replaced() -> None:
    async with serving(lambda seen: response(200, {"ok": True})) as server:
        server.close_after_each = True
        api = client(server)
        try:
            assert await api.get("/a") == {"ok": True}
            assert await api.get("/b") == {"ok": True}
        finally:
            await api.close()
    assert server.connections == 2


async def test_connection_close_is_honoured() -> None:
    async with serving(lambda seen: response(200, {}, close=True)) as server:
        api = client(server)
        try:
            await api.get("/a")
            await api.get("/b")
        finally:
            await api.close()
    assert server.connections == 2


async def test_an_error_status_is_an_api_error_with_the_status_message() -> None:
    status = {"kind": "Status", "message": 'pods "web-0" not found', "code": 404}
    async with serving(lambda seen: response(404, status)) as server:
        api = client(server)
        try:
            with pytest.raises(ApiError) as raised:
                await api.get("/a")
        finally:
            await api.close()
    assert (raised.value.status, raised.value.message) == (404, 'pods "web-0" not found')


async def test_a_rotated_token_file_is_read_again_after_a_401(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")

    def answer(seen: Seen) -> bytes:
        if seen.headers["authorization"] == "Bearer old":
            token.write_text("new\n")  # the kubelet rotated it meanwhile
            return response(401, {"kind": "Status", "message": "Unauthorized"})
        return response(200, {"ok": True})

    async with serving(answer) as server:
        api = client(server, {"token": "old", "tokenFile": str(token)})
        try:
            assert await api.get("/a") == {"ok": True}
        finally:
            await api.close()
    assert [s.headers["authorization"] for s in server.seen] == ["Bearer old", "Bearer new"]


async def test_a_static_token_is_not_retried_after_a_401() -> None:
    async with serving(lambda seen: response(401, {"message": "Unauthorized"})) as server:
        api = client(server)
        try:
            with pytest.raises(ApiError) as raised:
                await api.get("/a")
        finally:
            await api.close()
    assert raised.value.status == 401
    assert len(server.seen) == 1


async def test_basic_auth() -> None:
    async with serving(lambda seen: response(200, {})) as server:
        api = client(server, {"username": "u", "password": "p"})
        try:
            await api.get("/a")
        finally:
            await api.close()
    assert server.seen[0].headers["authorization"] == "Basic dTpw"


async def test_a_call_past_the_timeout_raises_timeout_error() -> None:
    async with serving(lambda seen: None) as server:
        api = client(server, timeout_seconds=0.05)
        try:
            with pytest.raises(TimeoutError):
                await api.get("/a")
        finally:
            server.release.set()
            await api.close()


async def test_an_answer_that_is_not_http_is_an_http_error() -> None:
    async with serving(lambda seen: b"SSH-2.0-OpenSSH\r\n\r\n") as server:
        api = client(server)
        try:
            with pytest.raises(HttpError):
                await api.get("/a")
        finally:
            await api.close()


def served_tls(tmp_path: Path) -> tuple[ssl.SSLContext, bytes]:
    """A server context with a certificate for 127.0.0.1, and its CA's PEM."""
    authority = CertificateAuthority()
    pair = authority.issue_server(["127.0.0.1"])
    (tmp_path / "server.crt").write_bytes(pair.cert_pem)
    (tmp_path / "server.key").write_bytes(pair.key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    return context, authority.cert_pem


async def test_in_cluster_over_tls_with_the_account_ca_and_token(tmp_path: Path) -> None:
    server_tls, ca_pem = served_tls(tmp_path)
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "ca.crt").write_bytes(ca_pem)
    (account / "token").write_text("tok\n")
    (account / "namespace").write_text("my-app")
    async with serving(lambda seen: response(200, {"path": seen.target}), server_tls) as server:
        port = server.url.rsplit(":", 1)[1]
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port}
        api = RestClient(resolve(in_cluster_document(account, env)))
        try:
            together = await asyncio.gather(api.get("/a"), api.get("/b"))
            after = await api.get("/c")
        finally:
            await api.close()
    assert [g["path"] for g in [*together, after]] == ["/a", "/b", "/c"]
    assert {s.headers["authorization"] for s in server.seen} == {"Bearer tok"}
    assert server.seen[2].connection in {s.connection for s in server.seen[:2]}  # kept alive


async def test_a_server_another_ca_signed_is_refused(tmp_path: Path) -> None:
    server_tls, _ = served_tls(tmp_path)
    other = base64.b64encode(CertificateAuthority().cert_pem).decode()
    async with serving(lambda seen: response(200, {}), server_tls) as server:
        access = ClusterAccess("c", "ns", server.url, {"certificate-authority-data": other},
                               {"token": "t"}, None)  # fmt: skip
        api = RestClient(access)
        try:
            with pytest.raises(ssl.SSLCertVerificationError):
                await api.get("/a")
        finally:
            await api.close()
    assert server.seen == []


async def test_an_exec_plugin_token_is_sent(tmp_path: Path) -> None:
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": "from-plugin"}}  # fmt: skip
    plugin = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
              "args": ["-c", f"print({json.dumps(json.dumps(credential))})"]}  # fmt: skip
    async with serving(lambda seen: response(200, {})) as server:
        api = client(server, {"exec": plugin})
        try:
            await api.get("/a")
        finally:
            await api.close()
    assert server.seen[0].headers["authorization"] == "Bearer from-plugin"


def test_an_inline_client_certificate_is_loaded(tmp_path: Path) -> None:
    pair = CertificateAuthority().issue_server(["client"])
    user = {"client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
            "client-key-data": base64.b64encode(pair.key_pem).decode()}  # fmt: skip
    access = ClusterAccess("c", "ns", "https://127.0.0.1:1", {}, user, None)
    assert tls_context(access).verify_mode is ssl.CERT_REQUIRED  # the pair loaded, no error
    wrong = {**user, "client-key-data": base64.b64encode(b"not a key").decode()}
    with pytest.raises(ssl.SSLError):
        tls_context(ClusterAccess("c", "ns", "https://127.0.0.1:1", {}, wrong, None))


async def test_a_204_has_no_body_and_keeps_the_connection() -> None:
    async with serving(lambda seen: b"HTTP/1.1 204 No Content\r\n\r\n") as server:
        api = client(server)
        try:
            assert await api.get("/a") is None
            assert await api.get("/b") is None
        finally:
            await api.close()
    assert server.connections == 1
