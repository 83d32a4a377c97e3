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


# --- the other kinds kubesim serves: printers.go AddHandlers, SwaggerDoc descriptions, v1.34 ---

NAMESPACE = (
    NAME,
    ColumnDefinition("Status", "string", "The status of the namespace"),
    AGE,
)  # fmt: skip

SECRET = (
    NAME,
    ColumnDefinition(
        "Type", "string",
        "Used to facilitate programmatic handling of secret data. More info: "
        "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
    ),
    ColumnDefinition(
        "Data", "string",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', "
        "'_' or '.'. The serialized form of the secret data is a base64 encoded string, "
        "representing the arbitrary (possibly non-string) data value here. Described in "
        "https://tools.ietf.org/html/rfc4648#section-4",
    ),
    AGE,
)  # fmt: skip

SERVICE_ACCOUNT = (
    NAME,
    ColumnDefinition(
        "Secrets", "string",
        "Secrets is a list of the secrets in the same namespace that pods running using this "
        "ServiceAccount are allowed to use. Pods are only limited to this list if this service "
        'account has a "kubernetes.io/enforce-mountable-secrets" annotation set to "true". The '
        '"kubernetes.io/enforce-mountable-secrets" annotation is deprecated since v1.32. Prefer '
        "separate namespaces to isolate access to mounted secrets. This field should not be "
        "used to find auto-generated service account token secrets for use outside of pods. "
        "Instead, tokens can be requested directly using the TokenRequest API, or service "
        "account token secrets can be manually created. More info: "
        "https://kubernetes.io/docs/concepts/configuration/secret",
    ),
    AGE,
)  # fmt: skip

CONFIG_MAP = (
    NAME,
    ColumnDefinition(
        "Data", "string",
        "Data contains the configuration data. Each key must consist of alphanumeric "
        "characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the "
        "BinaryData field. The keys stored in Data must not overlap with the keys in the "
        "BinaryData field, this is enforced during validation process.",
    ),
    AGE,
)  # fmt: skip

EVENT = (
    ColumnDefinition(
        "Last Seen", "string",
        "The time at which the most recent occurrence of this event was recorded.",
    ),
    ColumnDefinition(
        "Type", "string",
        "Type of this event (Normal, Warning), new types could be added in the future",
    ),
    ColumnDefinition(
        "Reason", "string",
        "This should be a short, machine understandable string that gives the reason for the "
        "transition into the object's current status.",
    ),
    ColumnDefinition("Object", "string", "The object that this event is about."),
    ColumnDefinition(
        "Subobject", "string",
        "If referring to a piece of an object instead of an entire object, this string should "
        "contain a valid JSON/Go field access statement, such as "
        "desiredState.manifest.containers[2]. For example, if the object reference is to a "
        'container within a pod, this would take on a value like: "spec.containers{name}" '
        '(where "name" refers to the name of the container that triggered the event) or if no '
        'container name is specified "spec.containers[2]" (container with index 2 in this pod). '
        "This syntax is chosen only to have some well-defined way of referencing a part of an "
        "object.",
        priority=1,
    ),
    ColumnDefinition(
        "Source", "string",
        "The component reporting this event. Should be a short machine understandable string.",
        priority=1,
    ),
    ColumnDefinition(
        "Message", "string",
        "A human-readable description of the status of this operation.",
    ),
    ColumnDefinition(
        "First Seen", "string",
        "The time at which the event was first recorded. (Time of server receipt is in "
        "TypeMeta.)",
        priority=1,
    ),
    ColumnDefinition("Count", "string", "The number of times this event has occurred.", priority=1),
    ColumnDefinition(
        "Name", "string",
        "Name must be unique within a namespace. Is required when creating resources, although "
        "some resources may allow a client to request the generation of an appropriate name "
        "automatically. Name is primarily intended for creation idempotence and configuration "
        "definition. Cannot be updated. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        format="name",
        priority=1,
    ),
)  # fmt: skip

SERVICE = (
    NAME,
    ColumnDefinition(
        "Type", "string",
        "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are "
        'ExternalName, ClusterIP, NodePort, and LoadBalancer. "ClusterIP" allocates a '
        "cluster-internal IP address for load-balancing to endpoints. Endpoints are determined "
        "by the selector or if that is not specified, by manual construction of an Endpoints "
        'object or EndpointSlice objects. If clusterIP is "None", no virtual IP is allocated '
        "and the endpoints are published as a set of endpoints rather than a virtual IP. "
        '"NodePort" builds on ClusterIP and allocates a port on every node which routes to the '
        'same endpoints as the clusterIP. "LoadBalancer" builds on NodePort and creates an '
        "external load-balancer (if supported in the current cloud) which routes to the same "
        'endpoints as the clusterIP. "ExternalName" aliases this service to the specified '
        "externalName. Several other fields do not apply to ExternalName services. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
    ),
    ColumnDefinition(
        "Cluster-IP", "string",
        "clusterIP is the IP address of the service and is usually assigned randomly. If an "
        "address is specified manually, is in-range (as per system configuration), and is not "
        "in use, it will be allocated to the service; otherwise creation of the service will "
        "fail. This field may not be changed through updates unless the type field is also "
        "being changed to ExternalName (which requires this field to be blank) or the type "
        "field is being changed from ExternalName (in which case this field may optionally be "
        'specified, as describe above).  Valid values are "None", empty string (""), or a valid '
        'IP address. Setting this to "None" makes a "headless service" (no virtual IP), which '
        "is useful when direct endpoint connections are preferred and proxying is not required. "
        " Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is "
        "specified when creating a Service of type ExternalName, creation will fail. This field "
        "will be wiped when updating a Service to type ExternalName. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    ColumnDefinition(
        "External-IP", "string",
        "externalIPs is a list of IP addresses for which nodes in the cluster will also accept "
        "traffic for this service.  These IPs are not managed by Kubernetes.  The user is "
        "responsible for ensuring that traffic arrives at a node with this IP.  A common "
        "example is external load-balancers that are not part of the Kubernetes system.",
    ),
    ColumnDefinition(
        "Port(s)", "string",
        "The list of ports that are exposed by this service. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    AGE,
    ColumnDefinition(
        "Selector", "string",
        "Route service traffic to pods with label keys and values matching this selector. If "
        "empty or not present, the service is assumed to have an external process managing its "
        "endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, "
        "NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/",
        priority=1,
    ),
)  # fmt: skip

STATEFUL_SET = (
    NAME,
    ColumnDefinition("Ready", "string", "Number of the pod with ready state"),
    AGE,
    ColumnDefinition(
        "Containers", "string",
        "Names of each container in the template.",
        priority=1,
    ),
    ColumnDefinition(
        "Images", "string",
        "Images referenced by each container in the template.",
        priority=1,
    ),
)  # fmt: skip

DAEMON_SET = (
    NAME,
    ColumnDefinition(
        "Desired", "integer",
        "The total number of nodes that should be running the daemon pod (including nodes "
        "correctly running the daemon pod). More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    ColumnDefinition(
        "Current", "integer",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run the "
        "daemon pod. More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    ColumnDefinition(
        "Ready", "integer",
        "The number of nodes that should be running the daemon pod and have one or more of the "
        "daemon pod running and ready.",
    ),
    ColumnDefinition(
        "Up-to-date", "integer",
        "The total number of nodes that are running updated daemon pod",
    ),
    ColumnDefinition(
        "Available", "integer",
        "The number of nodes that should be running the daemon pod and have one or more of the "
        "daemon pod running and available (ready for at least spec.minReadySeconds)",
    ),
    ColumnDefinition(
        "Node Selector", "string",
        "NodeSelector is a selector which must be true for the pod to fit on a node. Selector "
        "which must match a node's labels for the pod to be scheduled on that node. More info: "
        "https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
    ),
    AGE,
    ColumnDefinition(
        "Containers", "string",
        "Names of each container in the template.",
        priority=1,
    ),
    ColumnDefinition(
        "Images", "string",
        "Images referenced by each container in the template.",
        priority=1,
    ),
    ColumnDefinition(
        "Selector", "string",
        "A label query over pods that are managed by the daemon set. Must match in order to be "
        "controlled. If empty, defaulted to labels on Pod template. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        priority=1,
    ),
)  # fmt: skip

CONTROLLER_REVISION = (
    NAME,
    ColumnDefinition("Controller", "string", "Controller of the object"),
    ColumnDefinition(
        "Revision", "string",
        "revision indicates the revision of the state represented by Data.",
    ),
    AGE,
)  # fmt: skip

JOB = (
    NAME,
    ColumnDefinition("Status", "string", "Status of the job."),
    ColumnDefinition(
        "Completions", "string",
        "The number of pods which reached phase Succeeded. The value increases monotonically "
        "for a given spec. However, it may decrease in reaction to scale down of elastic "
        "indexed jobs.",
    ),
    ColumnDefinition("Duration", "string", "Time required to complete the job."),
    AGE,
    ColumnDefinition(
        "Containers", "string",
        "Names of each container in the template.",
        priority=1,
    ),
    ColumnDefinition(
        "Images", "string",
        "Images referenced by each container in the template.",
        priority=1,
    ),
    ColumnDefinition(
        "Selector", "string",
        "A label query over pods that should match the pod count. Normally, the system sets "
        "this field for you. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        priority=1,
    ),
)  # fmt: skip

CRON_JOB = (
    NAME,
    ColumnDefinition("Schedule", "string",
                     "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
    ColumnDefinition(
        "Timezone", "string",
        "The time zone name for the given schedule, see "
        "https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this "
        "will default to the time zone of the kube-controller-manager process. The set of valid "
        "time zone names and the time zone offset is loaded from the system-wide time zone "
        "database by the API server during CronJob validation and the controller manager "
        "during execution. If no system-wide time zone database can be found a bundled version "
        "of the database is used instead. If the time zone name becomes invalid during the "
        "lifetime of a CronJob or due to a change in host configuration, the controller will "
        "stop creating new new Jobs and will create a system event with the reason "
        "UnknownTimeZone. More information can be found in "
        "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
    ),
    ColumnDefinition(
        "Suspend", "boolean",
        "This flag tells the controller to suspend subsequent executions, it does not apply to "
        "already started executions.  Defaults to false.",
    ),
    ColumnDefinition("Active", "integer", "A list of pointers to currently running jobs."),
    ColumnDefinition("Last Schedule", "string",
                     "Information when was the last time the job was successfully scheduled."),
    AGE,
    JOB[5],
    JOB[6],
    JOB[7],
)  # fmt: skip

POD_DISRUPTION_BUDGET = (
    NAME,
    ColumnDefinition(
        "Min Available", "string",
        "The minimum number of pods that must be available.",
    ),
    ColumnDefinition(
        "Max Unavailable", "string",
        "The maximum number of pods that may be unavailable.",
    ),
    ColumnDefinition(
        "Allowed Disruptions", "integer",
        "Calculated number of pods that may be disrupted at this time.",
    ),
    AGE,
)  # fmt: skip

LEASE = (
    NAME,
    ColumnDefinition(
        "Holder", "string",
        "holderIdentity contains the identity of the holder of a current lease. If Coordinated "
        "Leader Election is used, the holder identity must be equal to the elected "
        "LeaseCandidate.metadata.name field.",
    ),
    AGE,
)  # fmt: skip

VALIDATING_WEBHOOK = (
    NAME,
    ColumnDefinition(
        "Webhooks", "integer",
        "Webhooks indicates the number of webhooks registered in this configuration",
    ),
    AGE,
)  # fmt: skip

VALIDATING_ADMISSION_POLICY = (
    NAME,
    ColumnDefinition(
        "Validations", "integer",
        "Validations indicates the number of validation rules defined in this configuration",
    ),
    ColumnDefinition(
        "ParamKind", "string",
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    AGE,
)  # fmt: skip

VALIDATING_ADMISSION_POLICY_BINDING = (
    NAME,
    ColumnDefinition(
        "PolicyName", "string",
        "PolicyName indicates the policy definition which the policy binding binded to",
    ),
    ColumnDefinition(
        "ParamRef", "string",
        "ParamRef indicates the param resource which sets the configration param",
    ),
    AGE,
)  # fmt: skip

PRIORITY_CLASS = (
    NAME,
    ColumnDefinition(
        "Value", "integer",
        "value represents the integer value of this priority class. This is the actual priority "
        "that pods receive when they have the name of this class in their pod spec.",
    ),
    ColumnDefinition(
        "Global-Default", "boolean",
        "globalDefault specifies whether this PriorityClass should be considered as the default "
        "priority for pods that do not have any priority class. Only one PriorityClass can be "
        "marked as `globalDefault`. However, if more than one PriorityClasses exists with their "
        "`globalDefault` field set to true, the smallest value of such global default "
        "PriorityClasses will be used as the default priority.",
    ),
    AGE,
    ColumnDefinition(
        "PreemptionPolicy", "string",
        "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, "
        "PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
    ),
)  # fmt: skip

NETWORK_POLICY = (
    NAME,
    ColumnDefinition(
        "Pod-Selector", "string",
        "Selects the pods to which this NetworkPolicy object applies.  The array of ingress "
        "rules is applied to any pods selected by this field. Multiple network policies can "
        "select the same set of pods.  In this case, the ingress rules for each are combined "
        "additively. This field is NOT optional and follows standard label selector semantics. "
        "An empty podSelector matches all pods in this namespace.",
    ),
    AGE,
)  # fmt: skip

ROLE_BINDING = (
    NAME,
    ColumnDefinition(
        "Role", "string",
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the global "
        "namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
    ),
    AGE,
    ColumnDefinition("Users", "string", "Users in the roleBinding", priority=1),
    ColumnDefinition("Groups", "string", "Groups in the roleBinding", priority=1),
    ColumnDefinition("ServiceAccounts", "string", "ServiceAccounts in the roleBinding", priority=1),
)  # fmt: skip

CLUSTER_ROLE_BINDING = (
    NAME,
    ColumnDefinition(
        "Role", "string",
        "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef "
        "cannot be resolved, the Authorizer must return an error.",
    ),
    AGE,
    ColumnDefinition("Users", "string", "Users in the clusterRoleBinding", priority=1),
    ColumnDefinition("Groups", "string", "Groups in the clusterRoleBinding", priority=1),
    ColumnDefinition(
        "ServiceAccounts", "string",
        "ServiceAccounts in the clusterRoleBinding",
        priority=1,
    ),
)  # fmt: skip

ENDPOINTS = (
    NAME,
    ColumnDefinition(
        "Endpoints", "string",
        "The set of all endpoints is the union of all subsets. Addresses are placed into "
        "subsets according to the IPs they share. A single address with multiple ports, some of "
        "which are ready and some of which are not (because they come from different "
        "containers) will result in the address being displayed in different subsets for the "
        "different ports. No address will appear in both Addresses and NotReadyAddresses in the "
        "same subset. Sets of addresses and ports that comprise a service.",
    ),
    AGE,
)  # fmt: skip

ENDPOINT_SLICE = (
    NAME,
    ColumnDefinition(
        "AddressType", "string",
        "addressType specifies the type of address carried by this EndpointSlice. All addresses "
        "in this slice must be the same type. This field is immutable after creation. The "
        "following address types are currently supported: * IPv4: Represents an IPv4 Address. * "
        "IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.",
    ),
    ColumnDefinition(
        "Ports", "string",
        "ports specifies the list of network ports exposed by each endpoint in this slice. Each "
        "port must have a unique name. When ports is empty, it indicates that there are no "
        'defined ports. When a port is defined with a nil port value, it indicates "all ports". '
        "Each slice may include a maximum of 100 ports.",
    ),
    ColumnDefinition(
        "Endpoints", "string",
        "endpoints is a list of unique endpoints in this slice. Each slice may include a "
        "maximum of 1000 endpoints.",
    ),
    AGE,
)  # fmt: skip
