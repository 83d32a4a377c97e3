"""Waiting on what the API shows, for every end-to-end suite: one watch, re-checked on every
event, bounded so that a hang fails the test instead of the run (nothing is asserted on time)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from kubesim.client import KubeClient
from kubesim.cluster.runtime import Informer

Obj = dict[str, Any]

BOUND = 90.0  # a guard against hangs only


async def watch_until(
    client: KubeClient, api_version: str, plural: str, kind: str, namespace: str | None,
    predicate: Callable[[list[Obj]], bool], *, bound: float = BOUND,
) -> list[Obj]:  # fmt: skip
    """Return the objects once `predicate(all objects)` holds, re-checked on every watch event
    (list, then watch, from kubesim's informer: bookmarks, re-list on 410)."""
    informer = Informer(client, api_version, plural, kind, namespace=namespace)
    changed = asyncio.Event()
    informer.add_handler(lambda *_: changed.set())
    task = asyncio.get_running_loop().create_task(informer.run())
    try:
        async with asyncio.timeout(bound):
            await informer.synced.wait()
            while not predicate(informer.items()):
                changed.clear()
                await changed.wait()
        return informer.items()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
