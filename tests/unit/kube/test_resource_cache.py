"""ResourceCache: which informer answers for a namespace."""

from __future__ import annotations

import random

from graceful_drain.controller.decision.model import PodInfo
from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.cache import ResourceCache
from graceful_drain.kube.informer import Informer
from tests.unit.kube.test_informer import ScriptedSource


def informer() -> Informer[PodInfo]:
    return Informer("pods", ScriptedSource(), PodInfo.from_object,
                    backoff=Backoff(0.001, 0.002), rng=random.Random(1))  # fmt: skip


def test_an_empty_cluster_wide_informer_still_covers_every_namespace() -> None:
    cache = ResourceCache("pods", {None: informer()})
    assert cache.covers("any-namespace")
    assert cache.get("any-namespace", "web-1") is None


def test_per_namespace_informers_cover_only_their_namespaces() -> None:
    cache = ResourceCache("pods", {"team-a": informer(), "team-b": informer()})
    assert cache.covers("team-a") and cache.covers("team-b")
    assert not cache.covers("team-c")
    assert cache.get("team-c", "web-1") is None
