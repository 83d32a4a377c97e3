"""The reader names every failure as the evidence it becomes; reads are raw JSON."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.config.models import Cluster, User
from lightkube.core.exceptions import ApiError

from graceful_drain.termination.evidence import UnavailableReason
from graceful_drain.termination.reader import LightkubeReader, ReadFailure, failure_of

REQUEST = httpx2.Request("GET", "https://api.test/api/v1/namespaces/shop/pods/web-0")


def status_response(code: int, message: str) -> httpx2.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": "Forbidden", "code": code}  # fmt: skip
    return httpx2.Response(code, json=body, request=REQUEST)


def api_error(code: int, message: str) -> ApiError:
    return ApiError(request=REQUEST, response=status_response(code, message))


@pytest.mark.parametrize(
    ("error", "reason", "detail"),
    [
        (api_error(403, "pods is forbidden"), UnavailableReason.FORBIDDEN,
         "HTTP 403: pods is forbidden"),
        (api_error(401, "Unauthorized"), UnavailableReason.FORBIDDEN, "HTTP 401: Unauthorized"),
        (api_error(404, 'pods "web-0" not found'), UnavailableReason.NOT_FOUND,
         'HTTP 404: pods "web-0" not found'),
        (api_error(500, "etcdserver: leader changed"), UnavailableReason.ERROR,
         "HTTP 500: etcdserver: leader changed"),
        (httpx2.HTTPStatusError("bad gateway", request=REQUEST,
                                response=httpx2.Response(502, text="<html>", request=REQUEST)),
         UnavailableReason.ERROR, "HTTP 502: Bad Gateway"),
        (httpx2.ReadTimeout("timed out", request=REQUEST), UnavailableReason.TIMEOUT,
         "client timeout: ReadTimeout: timed out"),
        (httpx2.ConnectError("Connection refused", request=REQUEST), UnavailableReason.ERROR,
         "cannot reach the API server: ConnectError: Connection refused"),
        (ValueError("Expecting value"), UnavailableReason.ERROR, "ValueError: Expecting value"),
    ],
)  # fmt: skip
def test_failure_of(error: BaseException, reason: UnavailableReason, detail: str) -> None:
    unavailable = failure_of(error).unavailable
    assert (unavailable.reason, unavailable.detail) == (reason, detail)


def reader_answering(handler: httpx2.MockTransport) -> LightkubeReader:
    config = KubeConfig.from_one(
        cluster=Cluster(server="https://api.test"), user=User(token="t"), namespace="shop"
    ).get()
    return LightkubeReader(AsyncClient(config, transport=handler))


async def test_reads_are_raw_json_without_resource_version() -> None:
    seen: list[httpx2.Request] = []
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "uid": "u1"},
           "status": {"conditions": [{"type": "DisruptionTarget", "reason": "X"}]}}  # fmt: skip
    event = {"reason": "Evicted", "involvedObject": {"uid": "u1"}}

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        if request.url.path.endswith("/events"):
            return httpx2.Response(200, json={"kind": "EventList", "items": [event]})
        return httpx2.Response(200, json=pod)

    reader = reader_answering(httpx2.MockTransport(answer))
    try:
        assert await reader.get_pod("shop", "web-0") == pod
        assert await reader.list_events("shop", "involvedObject.uid=u1") == [event]
    finally:
        await reader.close()
    assert [r.url.path for r in seen] == [
        "/api/v1/namespaces/shop/pods/web-0",
        "/api/v1/namespaces/shop/events",
    ]
    assert "resourceVersion" not in seen[0].url.params  # a quorum read, not the watch cache
    assert seen[1].url.params["fieldSelector"] == "involvedObject.uid=u1"


async def test_an_http_failure_is_a_read_failure() -> None:
    reader = reader_answering(
        httpx2.MockTransport(lambda request: status_response(403, "nodes is forbidden"))
    )
    try:
        with pytest.raises(ReadFailure) as failure:
            await reader.get_node("node-1")
    finally:
        await reader.close()
    assert failure.value.unavailable.reason is UnavailableReason.FORBIDDEN


async def test_events_are_created_with_their_body() -> None:
    bodies: list[object] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return httpx2.Response(201, json=bodies[-1])

    reader = reader_answering(httpx2.MockTransport(answer))
    event: dict[str, object] = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"name": "web-0.1", "namespace": "shop"},
             "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "shop"},
             "reason": "TerminationClassified", "message": "m", "type": "Normal"}  # fmt: skip
    try:
        await reader.create_event("shop", event)
    finally:
        await reader.close()
    [body] = bodies
    assert isinstance(body, dict)
    assert {k: body[k] for k in ("reason", "message", "type", "involvedObject")} == {
        k: event[k] for k in ("reason", "message", "type", "involvedObject")
    }


def test_no_configuration_is_a_read_failure(tmp_path: Path) -> None:
    with pytest.raises(ReadFailure) as failure:
        LightkubeReader.open(tmp_path / "missing-kubeconfig")
    assert failure.value.unavailable.reason is UnavailableReason.ERROR
    assert "no usable Kubernetes configuration" in failure.value.unavailable.detail
