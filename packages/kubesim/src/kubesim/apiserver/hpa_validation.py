"""autoscaling/v2 HorizontalPodAutoscaler spec validation, after
pkg/apis/autoscaling/validation/validation.go (`validateHorizontalPodAutoscalerSpec` with the
options a create gets): replica bounds and the scale target's reference. Metrics and behavior
are not validated (docs/kubesim-fidelity.md)."""

from __future__ import annotations

from typing import Any

from kubesim.types import Obj

MIN_REPLICAS_LOWER_BOUND = 1  # without the HPAScaleToZero feature gate


def _path_segment_errors(value: str) -> list[str]:
    """apimachinery's path.IsValidPathSegmentName."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def _reference_causes(ref: Any, path: str) -> list[tuple[str, str]]:
    ref = ref if isinstance(ref, dict) else {}
    causes: list[tuple[str, str]] = []
    for key in ("kind", "name"):
        value = str(ref.get(key) or "")
        if not value:
            causes.append((f"{path}.{key}", "Required value"))
        causes += [(f"{path}.{key}", f'Invalid value: "{value}": {message}')
                   for message in _path_segment_errors(value)]  # fmt: skip
    api_version = str(ref.get("apiVersion") or "")
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    if api_version.count("/") > 1:
        causes.append((f"{path}.apiVersion",
                       f'Invalid value: "{api_version}": unexpected GroupVersion string: '
                       f"{api_version}"))  # fmt: skip
    elif not group:
        message = "apiVersion must specify API group"
        causes.append((f"{path}.apiVersion", f'Invalid value: "{api_version}": {message}'))
    return causes


def horizontal_pod_autoscaler_causes(obj: Obj) -> list[tuple[str, str]]:
    spec = obj.get("spec") or {}
    causes: list[tuple[str, str]] = []
    min_replicas = spec.get("minReplicas")
    max_replicas = int(spec.get("maxReplicas") or 0)
    if isinstance(min_replicas, int) and min_replicas < MIN_REPLICAS_LOWER_BOUND:
        causes.append(("spec.minReplicas", f"Invalid value: {min_replicas}: must be greater "
                       f"than or equal to {MIN_REPLICAS_LOWER_BOUND}"))  # fmt: skip
    if max_replicas < 1:
        causes.append(
            ("spec.maxReplicas", f"Invalid value: {max_replicas}: must be greater than 0")
        )
    if isinstance(min_replicas, int) and max_replicas < min_replicas:
        causes.append(("spec.maxReplicas", f"Invalid value: {max_replicas}: must be greater "
                       "than or equal to `minReplicas`"))  # fmt: skip
    return causes + _reference_causes(spec.get("scaleTargetRef"), "spec.scaleTargetRef")
