"""Watch semantics: resume from a resourceVersion, bookmarks, timeoutSeconds, 410 Gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from kubesim.client import KubeClient
from kubesim.sim import KubeSim

pytestmark = pytest.mark.e2e

CMS = "/api/v1/namespaces/default/configmaps"


async def test_watch_resumes_after_resource_version(lk: AsyncClient) -> None:
    first = await lk.create(ConfigMap(metadata=ObjectMeta(namespace="default", name="a")))
    await lk.create(ConfigMap(metadata=ObjectMeta(namespace="default", name="b")))
    await lk.delete(ConfigMap, "a", namespace="default")
    seen: list[tuple[str, str | None]] = []

    async def collect() -> None:
        async for event, obj in lk.watch(
            ConfigMap, namespace="default", resource_version=first.metadata.resourceVersion
        ):
            seen.append((event, obj.metadata.name))
            if len(seen) == 2:
                return

    await asyncio.wait_for(collect(), 10)
    assert seen == [("ADDED", "b"), ("DELETED", "a")]


async def test_watch_without_version_starts_with_current_state(lk: AsyncClient) -> None:
    await lk.create(ConfigMap(metadata=ObjectMeta(namespace="default", name="present")))

    async def first_event() -> tuple[str, str | None]:
        async for event, obj in lk.watch(ConfigMap, namespace="default"):
            return event, obj.metadata.name
        raise AssertionError("watch ended")

    assert await asyncio.wait_for(first_event(), 10) == ("ADDED", "present")


async def test_label_selector_transitions_become_added_and_deleted(
    lk: AsyncClient, raw: KubeClient
) -> None:
    cm = await raw.create(CMS, {"metadata": {"name": "sel", "labels": {"app": "x"}}})
    events: list[str] = []

    async def collect() -> None:
        async for event in raw.watch(
            CMS, cm["metadata"]["resourceVersion"], 30, {"labelSelector": "app=y"}
        ):
            events.append(event["type"])
            if len(events) == 2:
                return

    task = asyncio.create_task(collect())
    cm["metadata"]["labels"] = {"app": "y"}
    cm = await raw.replace(f"{CMS}/sel", cm)
    cm["metadata"]["labels"] = {"app": "z"}
    await raw.replace(f"{CMS}/sel", cm)
    await asyncio.wait_for(task, 10)
    assert events == ["ADDED", "DELETED"]


async def test_bookmarks_carry_the_current_resource_version(sim: KubeSim, raw: KubeClient) -> None:
    sim.server.bookmark_interval = 0.2
    sim_rv = (await raw.get(CMS))["metadata"]["resourceVersion"]
    bookmark: dict[str, Any] = {}

    async def first_bookmark() -> None:
        async for event in raw.watch(CMS, sim_rv, 30):
            if event["type"] == "BOOKMARK":
                bookmark.update(event["object"])
                return

    await asyncio.wait_for(first_bookmark(), 15)
    assert bookmark["kind"] == "ConfigMap"
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(sim_rv)


async def test_events_queued_as_a_bookmark_falls_due_all_arrive(
    sim: KubeSim, raw: KubeClient
) -> None:
    sim.server.bookmark_interval = 0.01  # falls due while events are being written
    rv = (await raw.get(CMS))["metadata"]["resourceVersion"]
    count = 60

    async def added() -> int:
        seen = 0
        async for event in raw.watch(CMS, rv, 30):
            seen += event["type"] == "ADDED"
            if seen == count:
                break
        return seen

    watching = asyncio.create_task(added())
    for index in range(count):
        await raw.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": f"burst-{index}"}})  # fmt: skip
    assert await asyncio.wait_for(watching, 20) == count


async def test_a_watch_that_times_out_before_the_interval_gets_no_bookmark(
    raw: KubeClient,
) -> None:
    # The watch cache sends a bookmark per interval, never as the watch ends (measured
    # against kube-apiserver by the differential suite's "watch: bookmarks").
    rv = (await raw.get(CMS))["metadata"]["resourceVersion"]
    types = [event["type"] async for event in raw.watch(CMS, rv, 1)]
    assert types == []


async def test_timeout_seconds_ends_the_stream(raw: KubeClient) -> None:
    rv = (await raw.get(CMS))["metadata"]["resourceVersion"]

    async def drain() -> int:
        count = 0
        async for event in raw.watch(CMS, rv, 1, {"allowWatchBookmarks": "false"}):
            count += event["type"] != "BOOKMARK"
        return count

    assert await asyncio.wait_for(drain(), 10) == 0


async def test_compacted_resource_version_is_410(sim: KubeSim, raw: KubeClient) -> None:
    created = await raw.create(CMS, {"metadata": {"name": "old"}})
    await raw.create(CMS, {"metadata": {"name": "newer"}})
    sim.store.compact()  # the change that created "newer" is no longer in history
    events = [e async for e in raw.watch(CMS, created["metadata"]["resourceVersion"], 5)]
    # As the real watch cache: HTTP 200, then one ERROR event carrying the 410 Status.
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert status["code"] == 410
    assert status["reason"] == "Expired"
    assert status["message"].startswith("too old resource version:")


async def test_lightkube_watch_from_a_compacted_version_gets_410(
    sim: KubeSim, lk: AsyncClient
) -> None:
    from lightkube.core.exceptions import ApiError

    old = await lk.create(ConfigMap(metadata=ObjectMeta(namespace="default", name="old")))
    await lk.create(ConfigMap(metadata=ObjectMeta(namespace="default", name="newer")))
    sim.store.compact()
    with pytest.raises(ApiError) as err:
        async for _ in lk.watch(
            ConfigMap, namespace="default", resource_version=old.metadata.resourceVersion
        ):
            pass
    assert err.value.status.code == 410


async def test_official_client_receives_bookmarks(sim: KubeSim) -> None:
    import kubernetes

    sim.server.bookmark_interval = 0.2
    api = kubernetes.config.new_client_from_config(config_file=str(sim.kubeconfig_path))
    core = kubernetes.client.CoreV1Api(api)

    def first_bookmark() -> dict[str, Any]:
        stream = core.list_namespaced_config_map(
            "default", watch=True, allow_watch_bookmarks=True, timeout_seconds=10,
            resource_version="1", _preload_content=False,
        )  # fmt: skip
        try:
            for line in stream:
                import json

                event: dict[str, Any] = json.loads(line)
                if event["type"] == "BOOKMARK":
                    return event
        finally:
            stream.release_conn()
        raise AssertionError("no bookmark before the watch timed out")

    try:
        event = await asyncio.to_thread(first_bookmark)
    finally:
        api.close()
    assert event["object"]["kind"] == "ConfigMap"
    assert int(event["object"]["metadata"]["resourceVersion"]) >= 1


STREAMING_LIST = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}


async def test_streaming_list_ends_its_initial_events_with_an_annotated_bookmark(
    raw: KubeClient,
) -> None:
    """client-go's WatchListClient: the current state as ADDED, one bookmark annotated
    k8s.io/initial-events-end at the revision it was read at, then the changes after it."""
    for name in ("a", "b"):
        await raw.create(CMS, {"metadata": {"name": name}})
    read_at = int((await raw.get(CMS))["metadata"]["resourceVersion"])
    events: list[dict[str, Any]] = []

    async def until_after_the_bookmark() -> None:
        async for event in raw.watch(CMS, "", 30, STREAMING_LIST):
            events.append(event)
            if event["type"] == "BOOKMARK":
                await raw.create(CMS, {"metadata": {"name": "c"}})
            if event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "c":
                return

    await asyncio.wait_for(until_after_the_bookmark(), 10)
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", None), ("ADDED", "c"),
    ]  # fmt: skip
    bookmark = events[2]["object"]
    assert bookmark["kind"] == "ConfigMap"
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(bookmark["metadata"]["resourceVersion"]) == read_at


@pytest.mark.parametrize(
    ("params", "bookmarked"),
    [
        ({"resourceVersion": "0"}, True),  # defaulted to a streaming list (WatchList gate)
        ({"resourceVersion": ""}, True),
        ({"resourceVersion": "0", "allowWatchBookmarks": "false"}, False),
        ({**STREAMING_LIST, "allowWatchBookmarks": "false"}, False),
    ],
)
async def test_initial_events_end_bookmark_needs_bookmarks_and_initial_events(
    raw: KubeClient, params: dict[str, str], bookmarked: bool
) -> None:
    await raw.create(CMS, {"metadata": {"name": "a"}})
    rv = params.pop("resourceVersion", "")
    types = [e["type"] async for e in raw.watch(CMS, rv, 1, params)]
    assert types == (["ADDED", "BOOKMARK"] if bookmarked else ["ADDED"])


async def test_streaming_list_without_initial_events_starts_now(raw: KubeClient) -> None:
    await raw.create(CMS, {"metadata": {"name": "before"}})
    params = {**STREAMING_LIST, "sendInitialEvents": "false"}
    types = [e["type"] async for e in raw.watch(CMS, "0", 1, params)]
    assert types == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"sendInitialEvents": "true"},
         'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
         "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
        ({"resourceVersionMatch": "NotOlderThan"},
         'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
         "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"),
    ],
)  # fmt: skip
async def test_streaming_list_options_are_validated(
    raw: KubeClient, params: dict[str, str], message: str
) -> None:
    from kubesim.client import ApiStatusError

    with pytest.raises(ApiStatusError) as err:
        async for _ in raw.watch(CMS, "", 1, params):
            pass
    assert err.value.code == 422
    assert err.value.status["message"] == message
    assert err.value.status["details"]["group"] == "meta.k8s.io"
