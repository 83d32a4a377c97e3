"""Which ReplicaSets to scale, and to what, at one step of a rollout. Pure.

Each function returns the scale writes upstream's controller would issue in
order, so the I/O side only executes them: rolling.go (`reconcileNewReplicaSet`,
`reconcileOldReplicaSets` = `cleanupUnhealthyReplicas` then
`scaleDownOldReplicaSetsForRollingUpdate`), recreate.go, and sync.go (`scale`,
the proportional scaling of a Deployment resized mid-rollout).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubesim.types import Obj

from . import deployment_util as du
from .rollout_math import new_rs_new_replicas, proportion, replica_set_fraction


@dataclass(frozen=True, slots=True)
class ScaleStep:
    """Scale ReplicaSet `name` to `replicas`.

    `operation` None: scaleReplicaSetAndRecordEvent (nothing if the size is unchanged).
    "up"/"down"/"": scaleReplicaSet (also refreshes the replica annotations).
    """

    name: str
    replicas: int
    operation: str | None = None


def _name(rs: Obj) -> str:
    return str(rs["metadata"]["name"])


def new_rs_target(d: Obj, all_rss: Sequence[Obj], new_rs: Obj) -> int:
    """reconcileNewReplicaSet: the size the new ReplicaSet should have now."""
    want, current = du.replicas(d), du.replicas(new_rs)
    if current >= want:
        return want
    return new_rs_new_replicas(
        du.is_recreate(d),
        want,
        du.max_surge_value(d),
        sum(du.replicas(rs) for rs in all_rss),
        current,
    )


def new_rs_initial_replicas(d: Obj, old_rss: Sequence[Obj]) -> int:
    """The size of a ReplicaSet created now (NewRSNewReplicas with the new one at 0)."""
    return new_rs_new_replicas(
        du.is_recreate(d),
        du.replicas(d),
        du.max_surge_value(d),
        sum(du.replicas(rs) for rs in old_rss),
        0,
    )


def old_rs_scale_down(
    d: Obj, all_rss: Sequence[Obj], active_old_rss: Sequence[Obj], new_rs: Obj
) -> list[ScaleStep]:
    """reconcileOldReplicaSets: scale old ReplicaSets down as far as availability allows."""
    sizes = {_name(rs): du.replicas(rs) for rs in all_rss}
    if sum(du.replicas(rs) for rs in active_old_rss) == 0:
        return []
    all_pods = sum(sizes.values())
    min_available = du.replicas(d) - du.max_unavailable(d)
    new_unavailable = du.replicas(new_rs) - du.status_int(new_rs, "availableReplicas")
    max_scaled_down = all_pods - min_available - new_unavailable
    if max_scaled_down <= 0:
        return []
    steps: list[ScaleStep] = []
    olds = du.sorted_by_creation(active_old_rss)
    # Unhealthy replicas go first: removing them cannot lower availability.
    cleaned = 0
    for rs in olds:
        if cleaned >= max_scaled_down:
            break
        size, available = sizes[_name(rs)], du.status_int(rs, "availableReplicas")
        if size == 0 or size == available:
            continue
        count = min(max_scaled_down - cleaned, size - available)
        sizes[_name(rs)] = size - count
        steps.append(ScaleStep(_name(rs), size - count))
        cleaned += count
    available_pods = sum(du.status_int(rs, "availableReplicas") for rs in [*olds, new_rs])
    if available_pods <= min_available:
        return steps
    to_scale_down = available_pods - min_available
    scaled = 0
    for rs in olds:
        if scaled >= to_scale_down:
            break
        size = sizes[_name(rs)]
        if size == 0:
            continue
        count = min(size, to_scale_down - scaled)
        sizes[_name(rs)] = size - count
        steps.append(ScaleStep(_name(rs), size - count))
        scaled += count
    return steps


def recreate_scale_down(active_old_rss: Sequence[Obj]) -> list[ScaleStep]:
    return [ScaleStep(_name(rs), 0) for rs in active_old_rss if du.replicas(rs) != 0]


def proportional_scale(d: Obj, new_rs: Obj | None, old_rss: Sequence[Obj]) -> list[ScaleStep]:
    """sync.go `scale`: resize the Deployment's ReplicaSets after a change of spec.replicas."""
    want = du.replicas(d)
    target = du.find_active_or_latest(new_rs, old_rss)
    if target is not None:
        return [] if du.replicas(target) == want else [ScaleStep(_name(target), want)]
    if du.is_saturated(d, new_rs):
        return [ScaleStep(_name(rs), 0) for rs in du.active(old_rss)]
    if not du.is_rolling_update(d):
        return []
    running = du.active([*old_rss, new_rs])
    allowed = want + du.max_surge(d) if want > 0 else 0
    to_add = allowed - sum(du.replicas(rs) for rs in running)
    operation = ""
    if to_add > 0:
        running, operation = du.sorted_by_size_newer(running), "up"
    elif to_add < 0:
        running, operation = du.sorted_by_size_older(running), "down"
    sizes: dict[str, int] = {}
    added = 0
    for rs in running:
        size = du.replicas(rs)
        if to_add != 0:
            annotated = du.max_replicas_annotation(rs)
            if annotated is None:
                annotated = du.status_int(d, "replicas")
            fraction = replica_set_fraction(size, want, want + du.max_surge(d), annotated)
            share = proportion(size, fraction, to_add, added)
            sizes[_name(rs)] = size + share
            added += share
        else:
            sizes[_name(rs)] = size
    steps = []
    for index, rs in enumerate(running):
        size = sizes[_name(rs)]
        if index == 0 and to_add != 0:
            size = max(size + to_add - added, 0)
        steps.append(ScaleStep(_name(rs), size, operation))
    return steps


def is_scaling_event(d: Obj, new_rs: Obj | None, old_rss: Sequence[Obj]) -> bool:
    """isScalingEvent: an active ReplicaSet was sized for a different spec.replicas."""
    for rs in du.active([*old_rss, new_rs]):
        desired = du.desired_replicas_annotation(rs)
        if desired is not None and desired != du.replicas(d):
            return True
    return False


def cleanup_candidates(d: Obj, old_rss: Sequence[Obj]) -> list[Obj]:
    """cleanupDeployment: the old ReplicaSets beyond revisionHistoryLimit that can go."""
    limit = du.revision_history_limit(d)
    if limit is None:
        return []
    alive = [rs for rs in old_rss if not rs["metadata"].get("deletionTimestamp")]
    diff = len(alive) - limit
    if diff <= 0:
        return []
    out = []
    for rs in du.sorted_by_revision(alive)[:diff]:
        meta = rs["metadata"]
        observed = int((rs.get("status") or {}).get("observedGeneration", 0) or 0)
        if (
            du.status_int(rs, "replicas") != 0
            or du.replicas(rs) != 0
            or int(meta.get("generation", 0)) > observed
        ):
            continue
        out.append(rs)
    return out
