"""A PodDisruptionBudget's status, computed as the disruption controller does. Pure.

After pkg/controller/disruption/disruption.go (`getExpectedPodCount`,
`countHealthyPods`, `buildDisruptedPodMap`, `updatePdbStatus`, `failSafe`) and
k8s.io/component-helpers/apps/poddisruptionbudget (the DisruptionAllowed
condition), with apimachinery's `meta.SetStatusCondition`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubesim import jsoncodec
from kubesim.types import Obj

from ..apiserver.meta import parse_time, rfc3339
from .labels import labels_of, selector_matches
from .podutil import is_pod_ready
from .rollout_math import scaled_value

DELETION_TIMEOUT = 120.0  # DeletionTimeout: 2 minutes for an evicted pod to get deleted
DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"


def spec(pdb: Obj) -> Obj:
    return pdb.get("spec") or {}


def selects(pdb: Obj, pod: Obj) -> bool:
    """policy/v1: a missing selector selects nothing, an empty one every pod."""
    return selector_matches(spec(pdb).get("selector"), labels_of(pod))


def pdbs_for_pod(pdbs: Sequence[Obj], pod: Obj) -> list[Obj]:
    """GetPodPodDisruptionBudgets: same namespace, selector matches; unlabelled pods have none."""
    if not labels_of(pod):
        return []
    namespace = pod["metadata"].get("namespace", "")
    found = [p for p in pdbs if p["metadata"].get("namespace", "") == namespace and selects(p, pod)]
    return sorted(found, key=lambda p: str(p["metadata"]["name"]))


def needs_controller_scale(pdb: Obj) -> bool:
    """The expected count comes from the pods' controllers (maxUnavailable, or a % minAvailable)."""
    s = spec(pdb)
    if s.get("maxUnavailable") is not None:
        return True
    return isinstance(s.get("minAvailable"), str)


def expected_and_desired(pdb: Obj, pod_count: int, controller_scale: int) -> tuple[int, int]:
    """(expectedPods, desiredHealthy); percentages round up, as upstream."""
    s = spec(pdb)
    max_unavailable, min_available = s.get("maxUnavailable"), s.get("minAvailable")
    if max_unavailable is not None:
        expected = controller_scale
        desired = max(expected - scaled_value(max_unavailable, expected, True), 0)
        return expected, desired
    if isinstance(min_available, int) and not isinstance(min_available, bool):
        return pod_count, min_available
    if isinstance(min_available, str):
        return controller_scale, scaled_value(min_available, controller_scale, True)
    return 0, 0


def _time(value: Any) -> dt.datetime | None:
    try:
        return parse_time(str(value))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class DisruptedPods:
    kept: dict[str, str]  # pod name -> RFC 3339 time the eviction was allowed
    recheck_at: dt.datetime | None
    overdue: list[str]  # pods evicted more than the timeout ago and still not deleted


def build_disrupted_pods(
    pods: Sequence[Obj], pdb: Obj, now: dt.datetime, timeout: float = DELETION_TIMEOUT
) -> DisruptedPods:
    """buildDisruptedPodMap: entries of pods that are gone or already terminating are pruned,
    and so are entries older than the timeout (the pod was not deleted after all)."""
    recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
    kept: dict[str, str] = {}
    overdue: list[str] = []
    recheck: dt.datetime | None = None
    for pod in pods:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp") or name not in recorded:
            continue
        since = _time(recorded[name])
        if since is None:
            continue
        expected_deletion = since + dt.timedelta(seconds=timeout)
        if expected_deletion < now:
            overdue.append(name)
            continue
        if recheck is None or expected_deletion < recheck:
            recheck = expected_deletion
        kept[name] = recorded[name]
    return DisruptedPods(kept, recheck, overdue)


def count_healthy(
    pods: Sequence[Obj],
    disrupted: dict[str, str],
    now: dt.datetime,
    timeout: float = DELETION_TIMEOUT,
) -> int:
    """countHealthyPods: Ready, not terminating, not about to be deleted by an eviction."""
    healthy = 0
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        since = (
            _time(disrupted[pod["metadata"]["name"]])
            if (pod["metadata"]["name"] in disrupted)
            else None
        )
        if since is not None and since + dt.timedelta(seconds=timeout) > now:
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


# --- conditions ---------------------------------------------------------------------------


def set_status_condition(conditions: list[Obj], new: Obj, now: dt.datetime) -> None:
    """meta.SetStatusCondition: the transition time moves only when the status changes."""
    for existing in conditions:
        if existing.get("type") != new["type"]:
            continue
        if existing.get("status") != new["status"]:
            existing["status"] = new["status"]
            existing["lastTransitionTime"] = new.get("lastTransitionTime") or rfc3339(now)
        for key in ("reason", "message", "observedGeneration"):
            existing[key] = new.get(key, "" if key != "observedGeneration" else 0)
        if not existing.get("observedGeneration"):
            existing.pop("observedGeneration", None)
        return
    cond = dict(new)
    cond.setdefault("lastTransitionTime", rfc3339(now))
    if not cond.get("observedGeneration"):
        cond.pop("observedGeneration", None)
    conditions.append(cond)


def _allowed_condition(allowed: int, observed_generation: int) -> Obj:
    status, reason = ("True", SUFFICIENT_PODS) if allowed > 0 else ("False", INSUFFICIENT_PODS)
    return {
        "type": DISRUPTION_ALLOWED,
        "status": status,
        "reason": reason,
        "message": "",
        "observedGeneration": observed_generation,
    }


def conditions_up_to_date(pdb: Obj) -> bool:
    status = pdb.get("status") or {}
    cond = next(
        (c for c in status.get("conditions") or [] if c.get("type") == DISRUPTION_ALLOWED), None
    )
    if cond is None:
        return False
    if int(status.get("observedGeneration", 0)) != int(pdb["metadata"].get("generation", 0)):
        return False
    if int(status.get("disruptionsAllowed", 0)) > 0:
        return bool(cond.get("status") == "True" and cond.get("reason") == SUFFICIENT_PODS)
    return bool(cond.get("status") == "False" and cond.get("reason") == INSUFFICIENT_PODS)


def new_status(
    pdb: Obj,
    current_healthy: int,
    desired_healthy: int,
    expected: int,
    disrupted: dict[str, str],
    now: dt.datetime,
) -> Obj | None:
    """updatePdbStatus: the status to write, or None when the stored one is current."""
    allowed = current_healthy - desired_healthy
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status = pdb.get("status") or {}
    generation = int(pdb["metadata"].get("generation", 0))
    if (
        int(status.get("currentHealthy", 0)) == current_healthy
        and int(status.get("desiredHealthy", 0)) == desired_healthy
        and int(status.get("expectedPods", 0)) == expected
        and int(status.get("disruptionsAllowed", 0)) == allowed
        and (status.get("disruptedPods") or {}) == disrupted
        and int(status.get("observedGeneration", 0)) == generation
        and conditions_up_to_date(pdb)
    ):
        return None
    out: Obj = {
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": current_healthy,
        "desiredHealthy": desired_healthy,
        "expectedPods": expected,
        "conditions": jsoncodec.copy(status.get("conditions") or []),
    }
    if disrupted:
        out["disruptedPods"] = dict(disrupted)
    set_status_condition(out["conditions"], _allowed_condition(allowed, generation), now)
    return wire_status(out)


def fail_safe_status(pdb: Obj, message: str, now: dt.datetime) -> Obj:
    """failSafe: no disruptions allowed, DisruptionAllowed=False reason SyncFailed."""
    status = jsoncodec.copy(pdb.get("status") or {})
    status["disruptionsAllowed"] = 0
    conditions = status.setdefault("conditions", [])
    set_status_condition(
        conditions,
        {
            "type": DISRUPTION_ALLOWED,
            "status": "False",
            "reason": SYNC_FAILED,
            "message": message,
            "observedGeneration": int(status.get("observedGeneration", 0)),
        },
        now,
    )
    return wire_status(status)


def wire_status(status: Obj) -> Obj:
    """PodDisruptionBudgetStatus as Go serialises it."""
    out = dict(status)
    for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
        out.setdefault(key, 0)
    if not out.get("observedGeneration"):
        out.pop("observedGeneration", None)
    if not out.get("disruptedPods"):
        out.pop("disruptedPods", None)
    if not out.get("conditions"):
        out.pop("conditions", None)
    return out


def go_label_selector(selector: Any) -> str:
    """How `%v` prints a *metav1.LabelSelector (its generated String method)."""
    if not isinstance(selector, dict):
        return "nil"
    labels = selector.get("matchLabels") or {}
    label_text = "".join(f"{k}: {labels[k]}," for k in sorted(labels))
    exprs = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key', '')},Operator:{e.get('operator', '')},"
        f"Values:[{' '.join(e.get('values') or [])}],}},"
        for e in selector.get("matchExpressions") or []
    )
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{label_text}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
