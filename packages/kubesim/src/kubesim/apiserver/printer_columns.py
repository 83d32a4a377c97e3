"""The ``meta.k8s.io/v1`` Table column definitions kube-apiserver serves: the generic pair of
pkg/registry/rest/table.go and the per-kind columns of
pkg/printers/internalversion/printers.go (``AddHandlers``), descriptions from the generated
swagger docs those definitions read (``SwaggerDoc()``) at v1.34."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ColumnDefinition:
    name: str
    type: str
    description: str
    format: str = ""
    priority: int = 0  # 1: shown by `kubectl get -o wide` only

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


# metav1.ObjectMeta
_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although"
    " some resources may allow a client to request the generation of an appropriate name"
    " automatically. Name is primarily intended for creation idempotence and configuration"
    " definition. Cannot be updated. More info:"
    " https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_CREATION_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was"
    " created. It is not guaranteed to be set in happens-before order across separate"
    " operations. Clients may not set this value. It is represented in RFC3339 form and is in"
    " UTC.\n\nPopulated by the system. Read-only. Null for lists. More info:"
    " https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
_CONTAINERS_DOC = "Names of each container in the template."
_IMAGES_DOC = "Images referenced by each container in the template."

NAME = ColumnDefinition("Name", "string", _NAME_DOC, format="name")
AGE = ColumnDefinition("Age", "string", _CREATION_DOC)

GENERIC = (NAME, ColumnDefinition("Created At", "date", _CREATION_DOC))

POD = (
    NAME,
    ColumnDefinition(
        "Ready", "string", "The aggregate readiness state of this pod for accepting traffic."
    ),
    ColumnDefinition("Status", "string", "The aggregate status of the containers in this pod."),
    ColumnDefinition(
        "Restarts", "string",
        "The number of times the containers in this pod have been restarted and when the last"
        " container in this pod has restarted.",
    ),
    AGE,
    ColumnDefinition(
        "IP", "string",
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if not"
        " yet allocated.",
        priority=1,
    ),
    ColumnDefinition(
        "Node", "string",
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a"
        " candidate for scheduling by the scheduler defined in schedulerName. Once this field is"
        " set, the kubelet for this node becomes responsible for the lifecycle of this pod. This"
        " field should not be used to express a desire for the pod to be scheduled on a specific"
        " node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
        priority=1,
    ),
    ColumnDefinition(
        "Nominated Node", "string",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it"
        " cannot be scheduled right away as preemption victims receive their graceful"
        " termination periods. This field does not guarantee that the pod will be scheduled on"
        " this node. Scheduler may decide to place the pod elsewhere if other nodes become"
        " available sooner. Scheduler may also decide to give the resources on this node to a"
        " higher priority pod that is created after preemption. As a result, this field may be"
        " different than PodSpec.nodeName when the pod is scheduled.",
        priority=1,
    ),
    ColumnDefinition(
        "Readiness Gates", "string",
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready"
        " when all its containers are ready AND all conditions specified in the readiness gates"
        ' have status equal to "True" More info:'
        " https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
        priority=1,
    ),
)  # fmt: skip

REPLICA_SET = (
    NAME,
    ColumnDefinition(
        "Desired", "integer",
        "Replicas is the number of desired pods. This is a pointer to distinguish between"
        " explicit zero and unspecified. Defaults to 1. More info:"
        " https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
    ),
    ColumnDefinition(
        "Current", "integer",
        "Replicas is the most recently observed number of non-terminating pods. More info:"
        " https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
    ),
    ColumnDefinition(
        "Ready", "integer",
        "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
    ),
    AGE,
    ColumnDefinition("Containers", "string", _CONTAINERS_DOC, priority=1),
    ColumnDefinition("Images", "string", _IMAGES_DOC, priority=1),
    ColumnDefinition(
        "Selector", "string",
        "Selector is a label query over pods that should match the replica count. If the"
        " selector is empty, it is defaulted to the labels present on the pod template. Label"
        " keys and values that must match in order to be controlled by this replica set. More"
        " info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        priority=1,
    ),
)  # fmt: skip

DEPLOYMENT = (
    NAME,
    ColumnDefinition("Ready", "string", "Number of the pod with ready state"),
    ColumnDefinition(
        "Up-to-date", "string",
        "Total number of non-terminating pods targeted by this deployment that have the desired"
        " template spec.",
    ),
    ColumnDefinition(
        "Available", "string",
        "Total number of available non-terminating pods (ready for at least minReadySeconds)"
        " targeted by this deployment.",
    ),
    AGE,
    ColumnDefinition("Containers", "string", _CONTAINERS_DOC, priority=1),
    ColumnDefinition("Images", "string", _IMAGES_DOC, priority=1),
    ColumnDefinition(
        "Selector", "string",
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be"
        " the ones affected by this deployment.",
        priority=1,
    ),
)  # fmt: skip

_ADDRESSES_DOC = (
    "List of addresses reachable to the node. Queried from cloud provider, if available. More"
    " info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field"
    " is declared as mergeable, but the merge key is not sufficiently unique, which can cause"
    " data corruption when it is merged. Callers should instead use a full-replacement patch."
    " See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can"
    " change during the lifetime of a Node. However, there are some exceptions where this may"
    " not be possible, such as Pods that inherit a Node's address in its own status or"
    " consumers of the downward API (status.hostIP)."
)

NODE = (
    NAME,
    ColumnDefinition("Status", "string", "The status of the node"),
    ColumnDefinition("Roles", "string", "The roles of the node"),
    AGE,
    ColumnDefinition("Version", "string", "Kubelet Version reported by the node."),
    ColumnDefinition("Internal-IP", "string", _ADDRESSES_DOC, priority=1),
    ColumnDefinition("External-IP", "string", _ADDRESSES_DOC, priority=1),
    ColumnDefinition(
        "OS-Image", "string",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        priority=1,
    ),
    ColumnDefinition(
        "Kernel-Version", "string",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        priority=1,
    ),
    ColumnDefinition(
        "Container-Runtime", "string",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g."
        " containerd://1.4.2).",
        priority=1,
    ),
)  # fmt: skip

# autoscaling/v2beta1 HorizontalPodAutoscalerSpec/Status (what printers.go reads them from)
HORIZONTAL_POD_AUTOSCALER = (
    NAME,
    ColumnDefinition(
        "Reference", "string",
        "scaleTargetRef points to the target resource to scale, and is used to the pods for"
        " which metrics should be collected, as well as to actually change the replica count.",
    ),
    ColumnDefinition(
        "Targets", "string",
        "metrics contains the specifications for which to use to calculate the desired replica"
        " count (the maximum replica count across all metrics will be used).  The desired"
        " replica count is calculated multiplying the ratio between the target value and the"
        " current value by the current number of pods.  Ergo, metrics used must decrease as"
        " the pod count is increased, and vice-versa.  See the individual metric source types"
        " for more information about how each type of metric must respond.",
    ),
    ColumnDefinition(
        "MinPods", "string",
        "minReplicas is the lower limit for the number of replicas to which the autoscaler can"
        " scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha"
        " feature gate HPAScaleToZero is enabled and at least one Object or External metric is"
        " configured.  Scaling is active as long as at least one metric value is available.",
    ),
    ColumnDefinition(
        "MaxPods", "string",
        "maxReplicas is the upper limit for the number of replicas to which the autoscaler can"
        " scale up. It cannot be less that minReplicas.",
    ),
    ColumnDefinition(
        "Replicas", "string",
        "currentReplicas is current number of replicas of pods managed by this autoscaler, as"
        " last seen by the autoscaler.",
    ),
    AGE,
)  # fmt: skip
