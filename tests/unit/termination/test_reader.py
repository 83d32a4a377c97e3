"""The reader names every failure as the evidence it becomes; reads are raw JSON, quorum
reads (no resourceVersion), on the lean client (kube/rest.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from graceful_drain.kube.rest import ApiError, HttpError
from graceful_drain.termination.evidence import UnavailableReason
from graceful_drain.termination.reader import ReadFailure, RestReader, failure_of
from tests.unit.kube.loopback_http import Seen, client, response, serving


@pytest.mark.parametrize(
    ("error", "reason", "detail"),
    [
        (ApiError(403, "Forbidden", "pods is forbidden"), UnavailableReason.FORBIDDEN,
         "HTTP 403: pods is forbidden"),
        (ApiError(401, "Unauthorized", ""), UnavailableReason.FORBIDDEN,
         "HTTP 401: Unauthorized"),
        (ApiError(404, "Not Found", 'pods "web-0" not found'), UnavailableReason.NOT_FOUND,
         'HTTP 404: pods "web-0" not found'),
        (ApiError(500, "Internal", "etcdserver: leader changed"), UnavailableReason.ERROR,
         "HTTP 500: etcdserver: leader changed"),
        (TimeoutError(), UnavailableReason.TIMEOUT, "client timeout: TimeoutError"),
        (ConnectionRefusedError("Connection refused"), UnavailableReason.ERROR,
         "cannot reach the API server: ConnectionRefusedError: Connection refused"),
        (asyncio.IncompleteReadError(b"", 10), UnavailableReason.ERROR,
         "cannot reach the API server: IncompleteReadError: 0 bytes read on a total of 10 "
         "expected bytes"),
        (HttpError("not an HTTP/1.1 status line"), UnavailableReason.ERROR,
         "cannot reach the API server: HttpError: not an HTTP/1.1 status line"),
        (ValueError("Expecting value"), UnavailableReason.ERROR, "ValueError: Expecting value"),
    ],
)  # fmt: skip
def test_failure_of(error: BaseException, reason: UnavailableReason, detail: str) -> None:
    unavailable = failure_of(error).unavailable
    assert (unavailable.reason, unavailable.detail) == (reason, detail)


async def test_reads_are_raw_json_without_resource_version() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "uid": "u1"},
           "status": {"conditions": [{"type": "DisruptionTarget", "reason": "X"}]}}  # fmt: skip
    events = {
        "kind": "EventList",
        "items": [{"reason": "Evicted", "involvedObject": {"uid": "u1"}}],
    }

    def answer(seen: Seen) -> bytes:
        return response(200, events if "/events" in seen.target else pod)

    async with serving(answer) as server:
        reader = RestReader(client(server))
        try:
            assert await reader.get_pod("shop", "web-0") == pod
            assert await reader.list_events("shop", "involvedObject.uid=u1") == events
            await reader.get_node("node-1")
            await reader.get_replicaset("shop", "web-7f9")
            await reader.get_deployment("shop", "web")
        finally:
            await reader.close()
    assert [s.target for s in server.seen] == [
        "/prefix/api/v1/namespaces/shop/pods/web-0",
        "/prefix/api/v1/namespaces/shop/events?limit=500&fieldSelector=involvedObject.uid%3Du1",
        "/prefix/api/v1/nodes/node-1",
        "/prefix/apis/apps/v1/namespaces/shop/replicasets/web-7f9",
        "/prefix/apis/apps/v1/namespaces/shop/deployments/web",
    ]
    assert not any("resourceVersion" in s.target for s in server.seen)  # quorum reads


async def test_an_http_failure_is_a_read_failure() -> None:
    forbidden = {"kind": "Status", "message": "nodes is forbidden", "code": 403}
    async with serving(lambda seen: response(403, forbidden)) as server:
        reader = RestReader(client(server))
        try:
            with pytest.raises(ReadFailure) as failure:
                await reader.get_node("node-1")
        finally:
            await reader.close()
    assert failure.value.unavailable.reason is UnavailableReason.FORBIDDEN
    assert failure.value.unavailable.detail == "HTTP 403: nodes is forbidden"


async def test_events_are_created_with_their_body() -> None:
    async with serving(lambda seen: response(201, json.loads(seen.body))) as server:
        reader = RestReader(client(server))
        event: dict[str, object] = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": "web-0.1", "namespace": "shop"},
                 "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "shop"},
                 "reason": "TerminationClassified", "message": "m", "type": "Normal"}  # fmt: skip
        try:
            await reader.create_event("shop", event)
        finally:
            await reader.close()
    [seen] = server.seen
    assert (seen.method, seen.target) == ("POST", "/prefix/api/v1/namespaces/shop/events")
    assert json.loads(seen.body) == event


def test_no_configuration_is_a_read_failure(tmp_path: Path) -> None:
    with pytest.raises(ReadFailure) as failure:
        RestReader.open(tmp_path / "missing-kubeconfig")
    assert failure.value.unavailable.reason is UnavailableReason.ERROR
    assert "no usable Kubernetes configuration" in failure.value.unavailable.detail
