"""maxSurge and maxUnavailable resolution, exactly as the upstream Deployment controller does it.

Upstream references:
- k8s.io/apimachinery/pkg/util/intstr/intstr.go: GetScaledValueFromIntOrPercent and
  getIntOrPercentValueSafely (an int is taken as is; a string must be "<Atoi>%"; a percentage
  of `total` is rounded up or down in float64).
- k8s.io/kubernetes/pkg/controller/deployment/util/deployment_util.go: ResolveFenceposts
  (surge rounds UP, unavailable rounds DOWN; an error in either yields 0, 0) and MaxSurge
  (0 unless the strategy is RollingUpdate; the error of ResolveFenceposts is ignored) and
  MaxUnavailable (0 unless RollingUpdate with replicas > 0; capped at replicas).
- k8s.io/kubernetes/pkg/apis/apps/v1/defaults.go: SetDefaults_Deployment (strategy type
  RollingUpdate, maxSurge and maxUnavailable "25%" when absent).
"""

from __future__ import annotations

import math
import re

ROLLING_UPDATE = "RollingUpdate"
RECREATE = "Recreate"
DEFAULT_MAX_SURGE = "25%"
DEFAULT_MAX_UNAVAILABLE = "25%"

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# strconv.Atoi: optional sign, ASCII decimal digits, nothing else (no spaces, no underscores).
_ATOI = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _go_atoi(text: str) -> int | None:
    if _ATOI.fullmatch(text) is None:
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _wrap_int32(value: int) -> int:
    """Go's int32(x) conversion of an int."""
    return (value - _INT32_MIN) % 2**32 + _INT32_MIN


def scaled_value_from_int_or_percent(value: object, total: int, round_up: bool) -> int | None:
    """intstr.GetScaledValueFromIntOrPercent; None where upstream returns an error.

    `value` is the raw JSON: an int (Go decodes it into an int32, so anything else fails to
    decode) or a string that must end in "%".
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if _INT32_MIN <= value <= _INT32_MAX else None
    if not isinstance(value, str) or not value.endswith("%"):
        return None
    percent = _go_atoi(value[:-1])
    if percent is None:
        return None
    scaled = float(percent) * float(total) / 100
    rounded = math.ceil(scaled) if round_up else math.floor(scaled)
    # Go's int(float64) is undefined outside the int64 range; call that an error.
    return rounded if _INT64_MIN <= rounded <= _INT64_MAX else None


def _fenceposts(max_surge: object, max_unavailable: object, replicas: int) -> tuple[int, int]:
    """deploymentutil.ResolveFenceposts: (surge, unavailable); an error in either gives 0, 0,
    and 0, 0 becomes 0, 1 (a rollout must be able to make progress)."""
    surge = scaled_value_from_int_or_percent(
        DEFAULT_MAX_SURGE if max_surge is None else max_surge, replicas, round_up=True
    )
    unavailable = scaled_value_from_int_or_percent(
        DEFAULT_MAX_UNAVAILABLE if max_unavailable is None else max_unavailable,
        replicas,
        round_up=False,
    )
    if surge is None or unavailable is None:
        return 0, 0
    surge, unavailable = _wrap_int32(surge), _wrap_int32(unavailable)
    if surge == 0 and unavailable == 0:
        return 0, 1
    return surge, unavailable


def resolve_max_surge(
    strategy_type: str, max_surge: object, max_unavailable: object, replicas: int
) -> int:
    """deploymentutil.MaxSurge for an apps/v1 Deployment as read from raw JSON.

    `max_surge` / `max_unavailable` are the raw JSON values, None when absent (the API server
    defaults them to 25%). A value upstream cannot resolve gives 0, as MaxSurge does.
    """
    if strategy_type != ROLLING_UPDATE:
        return 0
    return _fenceposts(max_surge, max_unavailable, replicas)[0]


def resolve_max_unavailable(
    strategy_type: str, max_surge: object, max_unavailable: object, replicas: int
) -> int:
    """deploymentutil.MaxUnavailable: 0 unless RollingUpdate with replicas > 0, else the
    resolved maxUnavailable capped at `replicas`."""
    if strategy_type != ROLLING_UPDATE or replicas == 0:
        return 0
    return min(_fenceposts(max_surge, max_unavailable, replicas)[1], replicas)
