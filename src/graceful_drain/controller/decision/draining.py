"""Whether a Node is being drained: the one definition (docs/decisions.md, "Being drained").

A node is being drained when one of the drain clients has written its mark on it. Each
signal and where upstream writes it:

- `spec.unschedulable: true`: `kubectl cordon` / `kubectl drain` (k8s.io/kubectl
  pkg/drain/cordon.go), Karpenter before v0.32.
- the taint `node.kubernetes.io/unschedulable`: the node lifecycle controller mirrors
  `spec.unschedulable` into it (k8s.io/api core/v1 well_known_taints.go,
  `TaintNodeUnschedulable`; pkg/controller/nodelifecycle, taint-node-by-condition).
- the taint `karpenter.sh/disrupted`: Karpenter v1 disruption and termination controllers
  (sigs.k8s.io/karpenter pkg/apis/v1/taints.go, `DisruptedTaintKey`).
- the taint `karpenter.sh/disruption` (value `disrupting`): the same, Karpenter v0.32 to
  v0.37 (sigs.k8s.io/karpenter pkg/apis/v1beta1/taints.go, `DisruptionTaintKey`).
- the taint `ToBeDeletedByClusterAutoscaler`: Cluster Autoscaler's scale-down before it
  drains (k8s.io/autoscaler cluster-autoscaler/utils/taints/taints.go, `ToBeDeletedTaint`).
  Its soft `DeletionCandidateOfClusterAutoscaler` (PreferNoSchedule) is not a drain.
- `metadata.deletionTimestamp`: the Node is being deleted (Karpenter's termination
  finalizer drains it before the Node goes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
KARPENTER_DISRUPTED_TAINT = "karpenter.sh/disrupted"
KARPENTER_DISRUPTION_TAINT_V1BETA1 = "karpenter.sh/disruption"
CLUSTER_AUTOSCALER_TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"

DRAIN_TAINTS = frozenset(
    {
        UNSCHEDULABLE_TAINT,
        KARPENTER_DISRUPTED_TAINT,
        KARPENTER_DISRUPTION_TAINT_V1BETA1,
        CLUSTER_AUTOSCALER_TO_BE_DELETED_TAINT,
    }
)
UNSCHEDULABLE_SIGNAL = "spec.unschedulable"
DELETING_SIGNAL = "metadata.deletionTimestamp"


def drain_signals(node: Mapping[str, Any]) -> tuple[str, ...]:
    """The signals on the raw Node object saying it is being drained (empty: it stays):
    `spec.unschedulable`, `metadata.deletionTimestamp`, and the keys of the drain taints it
    carries. A field of the wrong type counts as absent."""
    signals: list[str] = []
    spec = node.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    metadata = node.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    if spec.get("unschedulable") is True:
        signals.append(UNSCHEDULABLE_SIGNAL)
    if metadata.get("deletionTimestamp"):
        signals.append(DELETING_SIGNAL)
    taints = spec.get("taints")
    for taint in taints if isinstance(taints, list) else ():
        if isinstance(taint, Mapping) and taint.get("key") in DRAIN_TAINTS:
            key = str(taint["key"])
            if key not in signals:
                signals.append(key)
    return tuple(signals)


def is_being_drained(node: Mapping[str, Any]) -> bool:
    """The one definition of "being drained" (see the module doc)."""
    return bool(drain_signals(node))
