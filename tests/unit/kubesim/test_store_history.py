"""The store's watch history: a watch resumed from an old resourceVersion gets what a watch
open all along got, though the history keeps its changes encoded."""

from __future__ import annotations

import pytest

from kubesim import jsoncodec
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.store import ObjectStore, Predicate, StorageKey, Watcher, WatchEvent
from kubesim.types import Obj

PODS: StorageKey = ("", "pods")


def labelled(name: str, app: str, rv: int) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv),
                         "labels": {"app": app}}, "spec": {"n": [1, 2.5, None, "é"]}}  # fmt: skip


def app_is(app: str) -> Predicate:
    return lambda obj: obj["metadata"]["labels"].get("app") == app


def drained(watcher: Watcher) -> list[WatchEvent]:
    events = []
    while not watcher.queue.empty():
        event = watcher.queue.get_nowait()
        assert event is not None
        events.append(event)
    return events


def write_history(store: ObjectStore) -> None:
    rv = store.next_revision
    store.put(PODS, labelled("a", "web", rv()))
    store.put(PODS, labelled("b", "web", rv()))
    store.put(PODS, labelled("a", "db", rv()))  # leaves the selector: DELETED for it
    store.put(PODS, labelled("a", "web", rv()))  # back: ADDED
    store.put(PODS, labelled("b", "web", rv()))
    store.remove(PODS, labelled("b", "web", rv()))


@pytest.mark.parametrize("since", [0, 1, 2, 3, 5])
def test_a_resumed_watch_gets_what_a_live_one_got(since: int) -> None:
    store = ObjectStore()
    live = store.watch(PODS, None, app_is("web"))
    write_history(store)
    seen = [(e.type, e.object) for e in drained(live)]
    resumed = store.watch(PODS, since, app_is("web"))
    replayed = [(e.type, e.object) for e in drained(resumed)]
    assert replayed == [(t, o) for t, o in seen if int(o["metadata"]["resourceVersion"]) > since]
    assert [t for t, _ in seen] == ["ADDED", "ADDED", "DELETED", "ADDED", "MODIFIED", "DELETED"]


def test_resuming_from_before_a_full_history_is_gone() -> None:
    store = ObjectStore(history_limit=2)
    write_history(store)
    with pytest.raises(ApiError) as gone:
        store.watch(PODS, 3, app_is("web"))
    assert gone.value.code == 410
    assert len(drained(store.watch(PODS, 4, app_is("web")))) == 2


@pytest.mark.parametrize(("since", "left_the_selector"), [(None, 1), (0, 1), (3, 0)])
def test_each_watch_line_is_the_line_its_object_encodes_to(
    since: int | None, left_the_selector: int
) -> None:
    """Live, listed first or replayed from the history, an event's line reuses the store's own
    encoding of its object where it has one; a line is what encoding the object gives."""
    store = ObjectStore()
    live = store.watch(PODS, None, app_is("web"))
    write_history(store)
    store.put(PODS, labelled("c", "web", store.next_revision()))
    events = drained(live) if since is None else drained(store.watch(PODS, since, app_is("web")))
    listed = drained(store.watch(PODS, None, app_is("web")))
    for event in events + listed:
        assert event.line() == jsoncodec.watch_event(event.type, event.object)
    # Only the DELETED of an object that left the selector (its previous state, at the new
    # revision, at rv 3) is not what the store wrote: it is encoded when written out.
    assert [e.type for e in events + listed if e.encoded is None] == ["DELETED"] * left_the_selector
    assert all(e.encoded is not None for e in listed) and len(listed) == 2
