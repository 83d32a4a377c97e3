"""Would a PodDisruptionBudget refuse the eviction of a pod? As the eviction subresource
decides (pkg/registry/core/pod/storage/eviction.go), from the budgets' current status."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graceful_drain.controller.decision.model import TERMINAL_POD_PHASES
from graceful_drain.inspection.selectors import labels_of, selector_matches

ALWAYS_ALLOW = "AlwaysAllow"  # spec.unhealthyPodEvictionPolicy


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    budget: str | None  # namespace/name of the one matching budget
    blocks: bool
    detail: str


def _name(budget: Mapping[str, Any]) -> str:
    metadata = budget.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def budgets_of(pod: Mapping[str, Any], budgets: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the budgets in the pod's namespace whose selector matches it."""
    namespace = (pod.get("metadata") or {}).get("namespace")
    labels = labels_of(pod)
    return [
        _name(budget)
        for budget in budgets
        if (budget.get("metadata") or {}).get("namespace") == namespace
        and selector_matches(
            (budget.get("spec") or {}).get("selector"), labels, empty_matches_all=False
        )
    ]


def check_budget(
    pod: Mapping[str, Any],
    ready: bool,
    budgets: Sequence[Mapping[str, Any]],
    *,
    surge: bool = False,
) -> BudgetCheck:
    """`surge`: graceful-drain first brings one more healthy pod up (a held eviction)."""
    if (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES:
        return BudgetCheck(None, False, "finished pods are not subject to budgets")
    names = budgets_of(pod, budgets)
    if not names:
        return BudgetCheck(None, False, "no PodDisruptionBudget")
    if len(names) > 1:
        return BudgetCheck(
            ", ".join(names), True,
            "more than one PodDisruptionBudget selects it: the API server refuses its eviction",
        )  # fmt: skip
    [budget] = [b for b in budgets if _name(b) == names[0]]
    spec, status = budget.get("spec") or {}, budget.get("status") or {}
    allowed = int(status.get("disruptionsAllowed") or 0)
    healthy = int(status.get("currentHealthy") or 0)
    desired = int(status.get("desiredHealthy") or 0)
    counts = f"disruptionsAllowed {allowed}, currentHealthy {healthy}, desiredHealthy {desired}"
    if not ready and (spec.get("unhealthyPodEvictionPolicy") == ALWAYS_ALLOW or healthy >= desired):
        return BudgetCheck(names[0], False, f"the pod is not healthy ({counts})")
    if allowed + (1 if surge else 0) > 0:
        return BudgetCheck(names[0], False, counts)
    return BudgetCheck(names[0], True, counts)
