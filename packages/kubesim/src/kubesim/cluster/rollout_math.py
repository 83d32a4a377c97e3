"""The arithmetic of a rollout, exactly as upstream computes it. Pure functions on ints.

- `scaled_value`: apimachinery/pkg/util/intstr GetScaledValueFromIntOrPercent
  (same float64 operations as Go, so the same rounding at every edge);
- `resolve_fenceposts`, `max_surge`, `max_unavailable`, `new_rs_new_replicas`,
  `proportion`: pkg/controller/deployment/util/deployment_util.go.
"""

from __future__ import annotations

import math
import re

IntOrString = int | str

_ATOI = re.compile(r"[+-]?[0-9]+")


class IntOrStringError(ValueError):
    pass


def _percent(value: str) -> int:
    if not value.endswith("%"):
        raise IntOrStringError(
            "invalid value for IntOrString: invalid type: string is not a percentage"
        )
    digits = value[:-1]
    if not _ATOI.fullmatch(digits):
        raise IntOrStringError(
            f'invalid value for IntOrString: invalid value "{value}": strconv.Atoi: parsing '
            f'"{digits}": invalid syntax'
        )
    return int(digits)


def scaled_value(value: IntOrString, total: int, round_up: bool) -> int:
    """An int as is; "N%" of `total`, rounded up or down."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise IntOrStringError(
            "invalid value for IntOrString: invalid type: neither int nor percentage"
        )
    if isinstance(value, int):
        return value
    percent = _percent(value)
    scaled = float(percent) * float(total) / 100
    return int(math.ceil(scaled) if round_up else math.floor(scaled))


def resolve_fenceposts(
    max_surge: IntOrString | None, max_unavailable: IntOrString | None, desired: int
) -> tuple[int, int]:
    """(surge, unavailable): surge rounds up, unavailable rounds down; both 0 -> unavailable 1."""
    surge = scaled_value(0 if max_surge is None else max_surge, desired, True)
    unavailable = scaled_value(0 if max_unavailable is None else max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        # Rounding down may resolve maxUnavailable to 0; surge might be blocked by quota.
        unavailable = 1
    return surge, unavailable


def max_surge(
    rolling: bool, surge: IntOrString | None, unavailable: IntOrString | None, replicas: int
) -> int:
    if not rolling:
        return 0
    return resolve_fenceposts(surge, unavailable, replicas)[0]


def max_unavailable(
    rolling: bool, surge: IntOrString | None, unavailable: IntOrString | None, replicas: int
) -> int:
    if not rolling or replicas == 0:
        return 0
    return min(resolve_fenceposts(surge, unavailable, replicas)[1], replicas)


def new_rs_new_replicas(
    recreate: bool,
    replicas: int,
    surge: IntOrString | None,
    all_rs_replicas: int,
    new_rs_replicas: int,
) -> int:
    """NewRSNewReplicas: how far the new ReplicaSet may be scaled up now."""
    if recreate:
        return replicas
    max_total = replicas + scaled_value(0 if surge is None else surge, replicas, True)
    if all_rs_replicas >= max_total:
        return new_rs_replicas
    scale_up = min(max_total - all_rs_replicas, replicas - new_rs_replicas)
    return new_rs_replicas + scale_up


def round_half_away(value: float) -> int:
    """Go's math.Round: halves away from zero (Python's round() goes to even)."""
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def replica_set_fraction(
    rs_replicas: int, deployment_replicas: int, deployment_max: int, annotated_max: int
) -> int:
    """getReplicaSetFraction: the change that keeps this ReplicaSet's share of the total."""
    if deployment_replicas == 0:
        return -rs_replicas
    if annotated_max == 0:
        return 0
    return round_half_away(float(rs_replicas * deployment_max) / float(annotated_max)) - rs_replicas


def proportion(rs_replicas: int, fraction: int, to_add: int, added: int) -> int:
    """GetProportion: bounded by what is still left to add (or remove)."""
    if rs_replicas == 0 or to_add == 0 or to_add == added:
        return 0
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)
