"""CPython's garbage collector, tuned while a KubeSim runs, and put back when the last stops.

kubesim's heap is trees of dicts and lists: every stored object and every informer's copy of
it. Serving one request allocates hundreds more, most of them gone a moment later. With the
collector's default first threshold (a collection of the youngest generation every 700 net
allocations) the objects of the requests in flight are caught alive at almost every request
and promoted, and the promotions bring on full collections, each a walk of the whole heap:
a fifth of kubesim's CPU in a drain of 50 Deployments. A threshold of 20,000 lets them die
young. The collector still runs; only its first threshold is raised, never lowered, for as
long as any KubeSim in the process runs.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000

_running = 0
_before: tuple[int, int, int] | None = None


def hold() -> None:
    """A KubeSim started: raise the threshold (the first holder saves what it was)."""
    global _running, _before
    if _running == 0:
        _before = gc.get_threshold()
        young, middle, old = _before
        gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
    _running += 1


def release() -> None:
    """A KubeSim stopped: the last one puts the thresholds back as it found them."""
    global _running, _before
    if _running == 0:
        return
    _running -= 1
    if _running == 0 and _before is not None:
        gc.set_threshold(*_before)
        _before = None
