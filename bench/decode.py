"""Why the cache keeps slim views of raw JSON: decode cost and retained memory per pod.

For a realistic watch-event pod (bench/objects.py, about 5 KiB of JSON with managedFields):
the time to decode it into a lightkube `Pod` model, into plain dicts, and into the cached
`PodInfo` by each route (the informer's list path decodes typed, straight into it); and the
memory a cache retains per pod (tracemalloc) when it keeps the `PodInfo` only, a raw dict,
or a lightkube model. Measured in this process.
"""

from __future__ import annotations

import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from lightkube.core.decoders import decode_object
from lightkube.resources.core_v1 import Pod

from bench import objects
from bench.report import Column, Table, fixed
from graceful_drain.controller.decision.model import PodInfo


@dataclass(frozen=True)
class DecodeProfile:
    pods: int = 2000
    repeats: int = 3


def realistic_bodies(count: int) -> list[bytes]:
    return [
        json.dumps(
            objects.pod(
                index,
                namespace=f"team-{index % 20}",
                name=f"checkout-api-7f9c8d6b5-{index:05d}",
                replicaset="checkout-api-7f9c8d6b5",
            )
        ).encode()
        for index in range(count)
    ]


def per_item_micros(bodies: list[bytes], step: Callable[[bytes], object]) -> float:
    started = time.perf_counter()
    for body in bodies:
        step(body)
    return (time.perf_counter() - started) / len(bodies) * 1e6


def retained_bytes_per_item(bodies: list[bytes], build: Callable[[bytes], object]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = {index: build(body) for index, body in enumerate(bodies)}
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return (after - before) / len(bodies)


def routes() -> list[tuple[str, Callable[[bytes], object]]]:
    decode = msgspec.json.Decoder().decode

    def model(body: bytes) -> object:
        return decode_object(body, Pod)

    def slim_via_model(body: bytes) -> object:
        return PodInfo.from_object(msgspec.to_builtins(decode_object(body, Pod)))

    def slim_via_dict(body: bytes) -> object:
        return PodInfo.from_object(decode(body))

    found = [
        ("lightkube Pod model (kept as is)", model),
        ("plain dict (kept as is)", decode),
        ("lightkube model → dict → PodInfo", slim_via_model),
        ("raw dict → PodInfo (the informer's tolerant route)", slim_via_dict),
    ]
    # The informer's typed list route; a --baseline commit from before it has no such line.
    from_listed = getattr(PodInfo, "from_listed", None)
    if from_listed is None:
        return found

    def slim_typed(body: bytes) -> object:
        keyed = from_listed(body)
        return None if keyed is None else keyed[1]

    return [*found, ("raw JSON → PodInfo, typed (the informer's list route)", slim_typed)]


def run(profile: DecodeProfile) -> Table:
    bodies = realistic_bodies(profile.pods)
    table = Table(
        "decode",
        "Decode cost and retained memory per pod, by route",
        [
            Column("route", "route"),
            Column("micros", "µs/pod", fixed(1)),
            Column("retained", "retained bytes/pod", fixed(0)),
        ],
    )
    for label, step in routes():
        per_item_micros(bodies[: min(200, len(bodies))], step)  # warm-up
        micros = min(per_item_micros(bodies, step) for _ in range(profile.repeats))
        table.add(route=label, micros=micros, retained=retained_bytes_per_item(bodies, step))
    size = sum(map(len, bodies)) / len(bodies)
    table.notes.append(
        f"{profile.pods:,} pods of {size / 1024:.1f} KiB of JSON each; best of "
        f"{profile.repeats} passes; retained memory by tracemalloc, in this process."
    )
    return table
