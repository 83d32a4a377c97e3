"""Watch interactions of the differential catalogue: resuming from a resourceVersion,
bookmarks, label-selector transitions both ways and a too-old resourceVersion (410 Gone).

Each records the event sequence a client sees (type, name, the label the selector reads),
or for bookmarks and errors the event's normalised object.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

from kubesim.client import MERGE_PATCH, resource_path

from .interactions import SELECTED, Api, Interaction, names_view, status_only
from .normalise import Json

WATCH_GUARD = 20.0  # a guard against hangs only: each watch ends on its own timeoutSeconds
NUMBER = re.compile(r"\d+")


def _configmap(name: str, tier: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"tier": tier}}, "data": {"k": "v"}}  # fmt: skip


def _summary(event: Mapping[str, Any]) -> list[str]:
    obj = event["object"]
    meta = obj.get("metadata") or {}
    return [event["type"], meta.get("name", ""), (meta.get("labels") or {}).get("tier", "")]


async def _events(
    api: Api, path: str, since: str, *, count: int | None = None, seconds: int = 5,
    params: Mapping[str, str] | None = None, bookmarks: bool = False,
) -> list[Mapping[str, Any]]:  # fmt: skip
    """The events of one watch: the first `count` (bookmarks left out unless asked for), or
    all of them until the server ends the watch after `seconds`."""
    out: list[Mapping[str, Any]] = []
    async with asyncio.timeout(WATCH_GUARD):
        async for event in api.client.watch(path, since, timeout_seconds=seconds,
                                            params=params):  # fmt: skip
            if event["type"] == "BOOKMARK" and not bookmarks:
                continue
            out.append(event)
            if count is not None and len(out) == count:
                break
    return out


async def _resume(api: Api) -> None:
    """A watch resumed from an object's resourceVersion replays only what came after it;
    from "0" it starts with the current state."""
    path = resource_path("v1", "configmaps", api.namespace)
    _, first = await api.call("create a", "POST", path, _configmap("a", "a"), view=status_only)
    await api.call("create b", "POST", path, _configmap("b", "a"), view=status_only)
    await api.call("label a", "PATCH", f"{path}/a", {"metadata": {"labels": {"x": "1"}}},
                   content_type=MERGE_PATCH, view=status_only)  # fmt: skip
    await api.call("delete b", "DELETE", f"{path}/b", view=status_only)
    # Selected: kube-controller-manager adds kube-root-ca.crt to the namespace at a moment
    # of its own (see docs/kubesim-fidelity.md).
    after_a = await _events(api, path, first["metadata"]["resourceVersion"], count=3,
                            params=SELECTED)  # fmt: skip
    api.note("resumed after a's creation", [_summary(e) for e in after_a])
    current = await _events(api, path, "0", count=1, params=SELECTED)
    api.note("from revision 0", [_summary(e) for e in current])
    one = await _events(api, path, "0", count=1,
                        params={"fieldSelector": "metadata.name=a"})  # fmt: skip
    api.note("one object by field selector", [_summary(e) for e in one])


def _is_bare_bookmark(obj: Mapping[str, Any], kind: str) -> bool:
    """The kind and metadata holding a resourceVersion and nothing else (a null
    creationTimestamp is how Go writes an empty ObjectMeta's time; a Pod's empty spec and
    status structs come along as Go writes them, and are not looked at)."""
    meta = obj.get("metadata") or {}
    return (
        obj.get("kind") == kind
        and bool(meta.get("resourceVersion"))
        and set(meta) <= {"resourceVersion", "creationTimestamp"}
        and meta.get("creationTimestamp") is None
    )


async def _bookmarks(api: Api) -> None:
    """An idle watch that allows bookmarks gets nothing but bookmarks, each carrying only the
    kind and a resourceVersion; one that does not allow them gets nothing. Whether a bookmark
    falls inside a 3-second watch is kube-apiserver's timing (its cacher sends them on a
    ticker), so their number is not compared, only what any of them holds."""
    for plural, kind in (("configmaps", "ConfigMap"), ("pods", "Pod")):
        path = resource_path("v1", plural, api.namespace)
        _, listed = await api.call(f"list {plural}", "GET", path, params=SELECTED,
                                   view=names_view)  # fmt: skip
        since = listed["metadata"]["resourceVersion"]
        idle = await _events(api, path, since, seconds=3, bookmarks=True, params=SELECTED)
        api.note(
            f"{kind} idle watch: not bookmarks",
            [e["type"] for e in idle if e["type"] != "BOOKMARK"],
        )
        api.note(f"{kind} bookmarks unlike a bare one", [
            e["object"] for e in idle
            if e["type"] == "BOOKMARK" and not _is_bare_bookmark(e["object"], kind)
        ])  # fmt: skip
        quiet = await _events(api, path, since, seconds=2, bookmarks=True,
                              params={**SELECTED, "allowWatchBookmarks": "false"})  # fmt: skip
        api.note(f"{kind} without bookmarks", [e["type"] for e in quiet])


async def _selector_transitions(api: Api) -> None:
    """An object entering a watch's label selector arrives as ADDED, changes inside it as
    MODIFIED, leaving it as DELETED; changes outside it are not seen."""
    path = resource_path("v1", "configmaps", api.namespace)
    _, listed = await api.call("list", "GET", path, params=SELECTED, view=names_view)
    since = listed["metadata"]["resourceVersion"]
    await api.call("create outside", "POST", path, _configmap("x", "b"), view=status_only)
    for step, tier in (("enter", "a"), ("leave", "b"), ("enter again", "a")):
        await api.call(step, "PATCH", f"{path}/x", {"metadata": {"labels": {"tier": tier}}},
                       content_type=MERGE_PATCH, view=status_only)  # fmt: skip
        if step == "enter":
            await api.call("change inside", "PATCH", f"{path}/x", {"data": {"k": "w"}},
                           content_type=MERGE_PATCH, view=status_only)  # fmt: skip
    await api.call("delete", "DELETE", f"{path}/x", view=status_only)
    events = await _events(api, path, since, count=5, params=SELECTED)
    api.note("selected watch", [[*_summary(e), (e["object"].get("data") or {}).get("k", "")]
                                for e in events])  # fmt: skip
    set_based = await _events(api, path, since, count=5,
                              params={"labelSelector": "tier,tier notin (a)"})  # fmt: skip
    api.note("set-based selector watch", [_summary(e) for e in set_based])


def _without_numbers(value: Json) -> Json:
    if isinstance(value, dict):
        return {k: _without_numbers(v) for k, v in value.items()}
    if isinstance(value, str):
        return NUMBER.sub("<n>", value)
    return value


def _event_view(event: Mapping[str, Any]) -> Json:
    if event["type"] == "ERROR":
        return ["ERROR", _without_numbers(event["object"])]
    return _summary(event)


async def _too_old(api: Api) -> None:
    """Once the history is compacted (and, on kube-apiserver, the watch cache rebuilt), a
    watch from an older revision is answered in a 200 stream with one ERROR event carrying
    a 410 Expired Status; before, it replays. Replayed from just before the create, not from
    revision 1: kube-apiserver compacts etcd on its own every 5 minutes, so once the suite
    has run that long revision 1 is gone before this interaction compacts anything."""
    path = resource_path("v1", "configmaps", api.namespace)
    _, listed = await api.call("list", "GET", path, params=SELECTED, view=names_view)
    since = listed["metadata"]["resourceVersion"]
    await api.call("create", "POST", path, _configmap("a", "a"), view=status_only)
    replayed = await _events(api, path, since, count=1, params=SELECTED)
    api.note("from before the create", [_event_view(e) for e in replayed])
    assert api.compact is not None, "the suite gives every server a way to compact"
    await asyncio.to_thread(api.compact)
    await api.client.close()  # its connections did not survive (a fresh session follows)
    for start, step in (("1", "from revision 1 once compacted"),
                        (since, "from before the create once compacted")):  # fmt: skip
        events = await _events(api, path, start, count=1, params=SELECTED)
        api.note(step, [_event_view(e) for e in events])
    await api.call("watch with a bad revision", "GET", path,
                   params={"watch": "true", "resourceVersion": "abc"})  # fmt: skip


async def _burst(api: Api) -> None:
    """Writes made at once reach a watch each as one event, in resourceVersion order (kubesim
    writes the events queued for a watch in one chunk): the same names, each once, with
    non-ASCII data decoded intact."""
    path = resource_path("v1", "configmaps", api.namespace)
    _, listed = await api.call("list", "GET", path, params=SELECTED, view=names_view)
    since = listed["metadata"]["resourceVersion"]
    names = [f"burst-{index:02d}" for index in range(BURST)]
    await asyncio.gather(*(
        api.client.create(path, {**_configmap(name, "a"), "data": {"k": f"{name} é 漢字 🙂"}})
        for name in names
    ))  # fmt: skip
    events = await _events(api, path, since, count=BURST, params=SELECTED)
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    api.note("types", sorted({e["type"] for e in events}))
    api.note("names, each once", sorted(e["object"]["metadata"]["name"] for e in events))
    api.note("in resourceVersion order", versions == sorted(versions))
    api.note("data decoded", all(
        e["object"]["data"]["k"] == f"{e['object']['metadata']['name']} é 漢字 🙂" for e in events
    ))  # fmt: skip


async def _compressed_lists(api: Api) -> None:
    """A list body over 128 KiB is gzip-compressed when Accept-Encoding names gzip (and then
    says Vary: Accept-Encoding); a smaller one, or one not asking for gzip, is not."""
    path = resource_path("v1", "configmaps", api.namespace)
    filler = "x" * 3000
    await asyncio.gather(*(
        api.client.create(path, {**_configmap(f"big-{index:02d}", "a"), "data": {"k": filler}})
        for index in range(COMPRESSED_LIST_ITEMS)
    ))  # fmt: skip
    cases: tuple[tuple[str, dict[str, str]], ...] = (
        ("gzip", {}), ("deflate, gzip", {}), (" gzip ,br", {}), ("identity", {}), ("", {}),
        ("gzip;q=1.0", {}), ("x-gzip", {}), ("GZIP", {}), ("gzip", {"limit": "5"}),
    )  # fmt: skip
    for accept, params in cases:
        headers = {"Accept-Encoding": accept} if accept else {"Accept-Encoding": ""}
        async with api.client.session.get(api.client.server + path, headers=headers,
                                          params={**SELECTED, **params}) as response:  # fmt: skip
            body = await response.json()
            api.note(f"Accept-Encoding {accept!r}, {params or 'all'}", {
                "code": response.status,
                "Content-Encoding": response.headers.get("Content-Encoding"),
                "Vary": response.headers.get("Vary"),
                "items": len(body.get("items") or []),
            })  # fmt: skip


STREAMING_LIST = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


async def _until_bookmark(
    api: Api, path: str, since: str, params: Mapping[str, str]
) -> list[Mapping[str, Any]]:
    """A watch's events up to its first bookmark (the watch ends on its own after 5 s if
    none comes)."""
    out: list[Mapping[str, Any]] = []
    async with asyncio.timeout(WATCH_GUARD):
        async for event in api.client.watch(path, since, timeout_seconds=5, params=params):
            out.append(event)
            if event["type"] == "BOOKMARK":
                break
    return out


def _initial_events_view(events: list[Mapping[str, Any]], kind: str) -> list[Json]:
    """The events' summaries, a bookmark's as its annotations and whether it is otherwise
    bare (kind and resourceVersion only)."""
    out: list[Json] = []
    for event in events:
        obj = event["object"]
        if event["type"] != "BOOKMARK":
            out.append(_summary(event))
            continue
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "annotations"}
        out.append(["BOOKMARK", (obj.get("metadata") or {}).get("annotations"),
                    _is_bare_bookmark({**obj, "metadata": meta}, kind)])  # fmt: skip
    return out


async def _streaming_list(api: Api) -> None:
    """client-go's streaming list (WatchListClient): a watch with sendInitialEvents=true and
    resourceVersionMatch=NotOlderThan sends the current state as ADDED events, then one
    bookmark annotated k8s.io/initial-events-end at a revision not older than the state's,
    then the changes after it. kube-apiserver 1.34 defaults a watch from "" or "0" that
    names neither to the same; sendInitialEvents=false starts from now; the options are
    validated (422, ListOptions)."""
    path = resource_path("v1", "configmaps", api.namespace)
    for name in ("a", "b"):
        await api.call(f"create {name}", "POST", path, _configmap(name, "a"), view=status_only)
    _, listed = await api.call("list", "GET", path, params=SELECTED, view=names_view)
    read_at = int(listed["metadata"]["resourceVersion"])
    for since, step, params in (
        ("", "streaming list", {**SELECTED, **STREAMING_LIST}),
        ("0", "streaming list from 0", {**SELECTED, **STREAMING_LIST}),
        (str(read_at), "streaming list not older than the list", {**SELECTED, **STREAMING_LIST}),
        ("", "watch from '' (defaulted)", SELECTED),
        ("0", "watch from 0 (defaulted)", SELECTED),
    ):
        events = await _until_bookmark(api, path, since, params)
        api.note(step, _initial_events_view(events, "ConfigMap"))
        bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
        api.note(f"{step}: bookmark not older than the list", [
            int(e["object"]["metadata"]["resourceVersion"]) >= read_at for e in bookmarks
        ])  # fmt: skip
    for since, step, params in (
        ("", "streaming list without bookmarks",
         {**SELECTED, **STREAMING_LIST, "allowWatchBookmarks": "false"}),
        ("0", "watch from 0 without bookmarks", {**SELECTED, "allowWatchBookmarks": "false"}),
        ("0", "no initial events, from 0",
         {**SELECTED, **STREAMING_LIST, "sendInitialEvents": "false",
          "allowWatchBookmarks": "false"}),
        ("", "no initial events, from ''",
         {**SELECTED, **STREAMING_LIST, "sendInitialEvents": "false",
          "allowWatchBookmarks": "false"}),
    ):  # fmt: skip
        events = await _events(api, path, since, seconds=1, params=params, bookmarks=True)
        api.note(step, [_summary(e) for e in events])
    invalid_watches: tuple[tuple[str, dict[str, str]], ...] = (
        ("sendInitialEvents without resourceVersionMatch", {"sendInitialEvents": "true"}),
        ("sendInitialEvents=false without resourceVersionMatch", {"sendInitialEvents": "false"}),
        ("resourceVersionMatch without sendInitialEvents",
         {"resourceVersionMatch": "NotOlderThan"}),
        ("resourceVersionMatch=Exact", {"sendInitialEvents": "true",
                                        "resourceVersionMatch": "Exact"}),
        ("resourceVersionMatch=Exact alone", {"resourceVersionMatch": "Exact",
                                              "resourceVersion": "1"}),
    )  # fmt: skip
    for step, params in invalid_watches:
        await api.call(f"watch: {step}", "GET", path,
                       params={"watch": "true", "timeoutSeconds": "1", **params})  # fmt: skip
    bad_revision = {"watch": "true", "resourceVersion": "abc", **STREAMING_LIST}
    await api.call("streaming list from a bad revision", "GET", path, params=bad_revision)
    invalid_lists: tuple[tuple[str, dict[str, str]], ...] = (
        ("sendInitialEvents", {"sendInitialEvents": "true"}),
        ("resourceVersionMatch without resourceVersion", {"resourceVersionMatch": "Exact"}),
        ("resourceVersionMatch=Exact from 0",
         {"resourceVersionMatch": "Exact", "resourceVersion": "0"}),
        ("resourceVersionMatch unknown",
         {"resourceVersionMatch": "Newest", "resourceVersion": "0"}),
    )  # fmt: skip
    for step, params in invalid_lists:
        await api.call(f"list: {step}", "GET", path, params={**SELECTED, **params},
                       view=names_view)  # fmt: skip


BURST = 30
COMPRESSED_LIST_ITEMS = 50  # ~160 KiB of ConfigMaps

WATCH: list[tuple[str, Interaction]] = [
    ("watch: resume from a revision", _resume),
    ("watch: a burst of writes arrives in order", _burst),
    ("list/watch serving: gzip past 128 KiB when accepted", _compressed_lists),
    ("watch: bookmarks", _bookmarks),
    ("watch: the streaming list (sendInitialEvents)", _streaming_list),
    ("watch: selector transitions both ways", _selector_transitions),
]
# Last in the catalogue: compacting restarts kube-apiserver, and until kube-controller-
# manager's informers have caught up again its garbage collector may, for instance, collect
# the dependents an Orphan deletion should have kept.
COMPACTING: list[tuple[str, Interaction]] = [
    ("watch: 410 Gone for a too-old revision", _too_old),
]
