"""Drain clients modelled on `kubectl drain`, Karpenter and Cluster Autoscaler.

Each acts only through the API, with its upstream timings as parameters:

    result = await KubectlDrain(client, retry_interval=0.05).drain("node-a")
    result.drained, result.error, result.texts("stderr")
"""

from .cluster_autoscaler_style import ClusterAutoscalerDrain
from .karpenter_style import KarpenterDrain
from .kubectl_style import KubectlDrain
from .result import DrainClient, DrainLog, DrainResult, LogLine

CLIENTS: dict[str, type[KubectlDrain] | type[KarpenterDrain] | type[ClusterAutoscalerDrain]] = {
    KubectlDrain.name: KubectlDrain,
    KarpenterDrain.name: KarpenterDrain,
    ClusterAutoscalerDrain.name: ClusterAutoscalerDrain,
}

__all__ = [
    "CLIENTS",
    "ClusterAutoscalerDrain",
    "DrainClient",
    "DrainLog",
    "DrainResult",
    "KarpenterDrain",
    "KubectlDrain",
    "LogLine",
]
