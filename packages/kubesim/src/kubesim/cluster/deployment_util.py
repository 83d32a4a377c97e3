"""Pure helpers over Deployment and ReplicaSet objects, after
pkg/controller/deployment/util/deployment_util.go and pkg/controller/controller_utils.go.

Objects are the API's JSON dicts. Functions that "set" something work on a copy
the caller owns and say whether they changed it, as upstream's do.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from kubesim import jsoncodec
from kubesim.identity_cache import IdentityCache
from kubesim.types import Obj

from .rollout_math import IntOrString
from .rollout_math import max_surge as _max_surge
from .rollout_math import max_unavailable as _max_unavailable

POD_TEMPLATE_HASH = "pod-template-hash"  # apps.DefaultDeploymentUniqueLabelKey
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ROLLBACK_TO = "deprecated.deployment.rollback.to"
MAX_REV_HISTORY_CHARS = 2000

_ANNOTATIONS_NOT_COPIED = frozenset(
    {LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS, ROLLBACK_TO}
)
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand


# --- fields -------------------------------------------------------------------------------


def replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas", 1)
    return int(value) if isinstance(value, int) else 1


def status_int(obj: Obj | None, field: str) -> int:
    if obj is None:
        return 0
    value = (obj.get("status") or {}).get(field, 0)
    return int(value) if isinstance(value, int) else 0


def get_annotations(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def uid(obj: Obj) -> str:
    return str(obj["metadata"].get("uid", ""))


def is_rolling_update(d: Obj) -> bool:
    strategy = (d.get("spec") or {}).get("strategy") or {}
    return bool(strategy.get("type", "RollingUpdate") == "RollingUpdate")


def is_recreate(d: Obj) -> bool:
    return bool(((d.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate")


def _rolling_params(d: Obj) -> tuple[IntOrString | None, IntOrString | None]:
    rolling = ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    return rolling.get("maxSurge"), rolling.get("maxUnavailable")


def max_surge_value(d: Obj) -> IntOrString | None:
    return _rolling_params(d)[0]


def max_surge(d: Obj) -> int:
    surge, unavailable = _rolling_params(d)
    return _max_surge(is_rolling_update(d), surge, unavailable, replicas(d))


def max_unavailable(d: Obj) -> int:
    surge, unavailable = _rolling_params(d)
    return _max_unavailable(is_rolling_update(d), surge, unavailable, replicas(d))


def min_ready_seconds(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("minReadySeconds", 0)
    return int(value) if isinstance(value, int) else 0


def progress_deadline(d: Obj) -> int | None:
    """spec.progressDeadlineSeconds, or None when unset or MaxInt32 (no deadline)."""
    value = (d.get("spec") or {}).get("progressDeadlineSeconds")
    if not isinstance(value, int) or value == 2**31 - 1:
        return None
    return value


def revision_history_limit(d: Obj) -> int | None:
    value = (d.get("spec") or {}).get("revisionHistoryLimit")
    if not isinstance(value, int) or value == 2**31 - 1:
        return None
    return value


# --- ordering -----------------------------------------------------------------------------


def by_creation(rs: Obj) -> tuple[str, str]:
    """ReplicaSetsByCreationTimestamp (RFC 3339 UTC strings sort chronologically)."""
    meta = rs["metadata"]
    return (str(meta.get("creationTimestamp", "")), str(meta["name"]))


def sorted_by_creation(rss: Iterable[Obj]) -> list[Obj]:
    return sorted(rss, key=by_creation)


def sorted_by_size_newer(rss: Iterable[Obj]) -> list[Obj]:
    """ReplicaSetsBySizeNewer: larger first; among equals the newer first."""
    ordered = sorted(rss, key=by_creation, reverse=True)
    return sorted(ordered, key=lambda rs: -replicas(rs))


def sorted_by_size_older(rss: Iterable[Obj]) -> list[Obj]:
    """ReplicaSetsBySizeOlder: larger first; among equals the older first."""
    return sorted(sorted(rss, key=by_creation), key=lambda rs: -replicas(rs))


def revision(obj: Obj) -> int | None:
    """The revision annotation: 0 when absent, None when it does not parse."""
    raw = get_annotations(obj).get(REVISION)
    if raw is None:
        return 0
    try:
        return int(raw)
    except ValueError:
        return None


def sorted_by_revision(rss: Iterable[Obj]) -> list[Obj]:
    def key(rs: Obj) -> tuple[int, str, str]:
        rev = revision(rs)
        return (rev if rev is not None else -1, *by_creation(rs))

    return sorted(rss, key=key)


def active(rss: Iterable[Obj | None]) -> list[Obj]:
    """FilterActiveReplicaSets: the ones with spec.replicas > 0."""
    return [rs for rs in rss if rs is not None and replicas(rs) > 0]


# --- templates and hashing ----------------------------------------------------------------


def _semantic(value: Any) -> Any:
    """Drop nulls and empty maps/lists: apimachinery's Semantic.DeepEqual treats them as unset."""
    if isinstance(value, dict):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _without_hash(template: Obj) -> Any:
    copy = jsoncodec.copy(template or {})
    labels = (copy.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(POD_TEMPLATE_HASH, None)
    return _semantic(copy)


# A Deployment's sync compares its template with each of its ReplicaSets' several times per
# rollout; the ReplicaSets come from the informer, whose objects are never changed.
_WITHOUT_HASH: IdentityCache[Any] = IdentityCache()


def _template_without_hash(obj: Obj) -> Any:
    template = template_of(obj)
    return _WITHOUT_HASH.get_or_compute(template, lambda t: _without_hash(template))


def equal_ignore_hash(t1: Obj, t2: Obj) -> bool:
    return bool(_without_hash(t1) == _without_hash(t2))


def same_template_ignoring_hash(a: Obj, b: Obj) -> bool:
    """equal_ignore_hash on the templates of two objects (Deployments or ReplicaSets)."""
    return bool(_template_without_hash(a) == _template_without_hash(b))


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def compute_hash(template: Obj, collision_count: int | None = None) -> str:
    """controller.ComputeHash, in shape: FNV-32a, decimal, then rand.SafeEncodeString.

    Upstream hashes a spew dump of the Go struct; we hash the canonical JSON of the
    template with empty values dropped, so the result is stable across reads and changes
    with any semantic change to the template (the restartedAt annotation included).
    """
    canonical = json.dumps(_semantic(template), sort_keys=True, separators=(",", ":"))
    data = canonical.encode()
    if collision_count is not None:
        data += struct.pack("<I", collision_count & 0xFFFFFFFF) + b"\x00" * 4
    decimal = str(_fnv32a(data))
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in decimal)


def template_of(obj: Obj) -> Obj:
    template = (obj.get("spec") or {}).get("template") or {}
    return template if isinstance(template, dict) else {}


# --- new and old ReplicaSets ---------------------------------------------------------------


def find_new_replica_set(d: Obj, rss: Sequence[Obj]) -> Obj | None:
    """The oldest ReplicaSet whose template equals the Deployment's, ignoring the hash label."""
    wanted = _template_without_hash(d)
    for rs in sorted_by_creation(rss):
        if _template_without_hash(rs) == wanted:
            return rs
    return None


def find_old_replica_sets(d: Obj, rss: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
    """(old ones with replicas, all old ones), in creation order."""
    new_rs = find_new_replica_set(d, rss)
    all_old = [rs for rs in sorted_by_creation(rss) if new_rs is None or uid(rs) != uid(new_rs)]
    return [rs for rs in all_old if replicas(rs) != 0], all_old


def max_revision(rss: Iterable[Obj]) -> int:
    return max((rev for rs in rss if (rev := revision(rs)) is not None), default=0)


def find_active_or_latest(new_rs: Obj | None, old_rss: Sequence[Obj]) -> Obj | None:
    if new_rs is None and not old_rss:
        return None
    newest_first = sorted(old_rss, key=by_creation, reverse=True)
    running = active([*newest_first, new_rs])
    if not running:
        return new_rs if new_rs is not None else newest_first[0]
    return running[0] if len(running) == 1 else None


def desired_replicas_annotation(rs: Obj) -> int | None:
    try:
        return int(get_annotations(rs)[DESIRED_REPLICAS])
    except (KeyError, ValueError):
        return None


def max_replicas_annotation(rs: Obj) -> int | None:
    try:
        return int(get_annotations(rs)[MAX_REPLICAS])
    except (KeyError, ValueError):
        return None


def is_saturated(d: Obj, rs: Obj | None) -> bool:
    if rs is None:
        return False
    desired = desired_replicas_annotation(rs)
    want = replicas(d)
    return (
        desired is not None
        and replicas(rs) == want
        and desired == want
        and status_int(rs, "availableReplicas") == want
    )


# --- annotations --------------------------------------------------------------------------


def _annotations_of(obj: Obj) -> dict[str, str]:
    meta = obj.setdefault("metadata", {})
    current = meta.get("annotations")
    if not isinstance(current, dict):
        current = {}
        meta["annotations"] = current
    return current


def set_replicas_annotations(rs: Obj, desired: int, max_replicas: int) -> bool:
    ann = _annotations_of(rs)
    changed = False
    for key, value in ((DESIRED_REPLICAS, str(desired)), (MAX_REPLICAS, str(max_replicas))):
        if ann.get(key) != value:
            ann[key] = value
            changed = True
    return changed


def replicas_annotations_need_update(rs: Obj, desired: int, max_replicas: int) -> bool:
    ann = get_annotations(rs)
    return ann.get(DESIRED_REPLICAS) != str(desired) or ann.get(MAX_REPLICAS) != str(max_replicas)


def copy_deployment_annotations(d: Obj, rs: Obj) -> bool:
    ann = _annotations_of(rs)
    changed = False
    for key, value in get_annotations(d).items():
        if key in _ANNOTATIONS_NOT_COPIED or ann.get(key) == value:
            continue
        ann[key] = value
        changed = True
    return changed


def set_new_replica_set_annotations(d: Obj, rs: Obj, new_revision: int, exists: bool) -> bool:
    """SetNewReplicaSetAnnotations: copy the Deployment's annotations, bump the revision
    (keeping the revision history on a rollback), and on creation the replica counts."""
    changed = copy_deployment_annotations(d, rs)
    ann = _annotations_of(rs)
    old_raw = ann.get(REVISION)
    had_revision = old_raw is not None
    try:
        old_revision = int(old_raw) if old_raw is not None and old_raw != "" else 0
    except ValueError:
        return False
    if old_revision < new_revision:
        ann[REVISION] = str(new_revision)
        changed = True
    if had_revision and old_revision < new_revision:
        history = ann.get(REVISION_HISTORY, "")
        old_revisions = history.split(",")
        if not old_revisions[0]:
            ann[REVISION_HISTORY] = str(old_raw)
        else:
            total = len(history) + len(str(old_raw)) + 1
            start = 0
            while total > MAX_REV_HISTORY_CHARS and start < len(old_revisions):
                total -= len(old_revisions[start]) + 1
                start += 1
            if total <= MAX_REV_HISTORY_CHARS:
                ann[REVISION_HISTORY] = ",".join([*old_revisions[start:], str(old_raw)])
    if not exists and set_replicas_annotations(rs, replicas(d), replicas(d) + max_surge(d)):
        changed = True
    return changed


def set_deployment_revision(d: Obj, new_revision: str) -> bool:
    ann = _annotations_of(d)
    if ann.get(REVISION) == new_revision:
        return False
    ann[REVISION] = new_revision
    return True
