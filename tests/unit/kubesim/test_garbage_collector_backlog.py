"""kubesim's garbage collector looks at every write after the fact; its backlog says how many
it has not looked at yet (the memory benchmark waits for it to be empty before measuring)."""

from __future__ import annotations

import asyncio

from kubesim.sim import KubeSim

STEPS = 1000  # loop iterations; the collector empties its queue in one


async def _until_looked_at(sim: KubeSim) -> None:
    for _ in range(STEPS):
        if sim.gc.backlog == 0:
            return
        await asyncio.sleep(0)  # one loop iteration: the collector's turn
    raise AssertionError(f"backlog still {sim.gc.backlog} after {STEPS} loop iterations")


async def test_the_backlog_counts_writes_the_collector_has_not_looked_at() -> None:
    async with KubeSim() as sim:
        await _until_looked_at(sim)
        for name in ("a", "b", "c"):
            sim.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": "default"}})  # fmt: skip
        assert sim.gc.backlog == 3
        await _until_looked_at(sim)
