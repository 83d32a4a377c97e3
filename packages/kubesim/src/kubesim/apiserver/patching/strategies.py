"""Strategic-merge tags of the kinds kubesim serves, copied from the upstream Go struct tags.

Sources: staging/src/k8s.io/api/core/v1/types.go, apps/v1/types.go, policy/v1/types.go,
admissionregistration/v1/types.go and apimachinery/pkg/apis/meta/v1/types.go, cross-checked
against the tags compiled into kubectl 1.33. Each entry is ``path: (patchStrategy,
patchMergeKey)``; a list not listed here is atomic (replaced whole), as upstream. Notably
atomic upstream although often assumed mergeable: ``NodeSpec.taints``, ``PodSpec.tolerations``,
``PodStatus.containerStatuses``, ``ServiceAccount.imagePullSecrets``, ``NamespaceSpec.finalizers``
and every RBAC list (``rules``, ``subjects``).
"""

from collections.abc import Mapping
from typing import Final

from kubesim.apiserver.patching.schema import FieldTag

# metav1.ObjectMeta
OBJECT_META: Final[Mapping[str, FieldTag]] = {
    "ownerReferences": ("merge", "uid"),
    "finalizers": ("merge", ""),
}

# core/v1 Container; EphemeralContainerCommon carries the same tags.
CONTAINER: Final[Mapping[str, FieldTag]] = {
    "ports": ("merge", "containerPort"),
    "env": ("merge", "name"),
    "volumeMounts": ("merge", "mountPath"),
    "volumeDevices": ("merge", "devicePath"),
}

# core/v1 ContainerStatus (the status lists themselves are atomic).
CONTAINER_STATUS: Final[Mapping[str, FieldTag]] = {
    "volumeMounts": ("merge", "mountPath"),
    "allocatedResourcesStatus": ("merge", "name"),
}


def _under(prefix: str, tags: Mapping[str, FieldTag]) -> dict[str, FieldTag]:
    return {f"{prefix}.{path}": tag for path, tag in tags.items()}


# core/v1 PodSpec
POD_SPEC: Final[Mapping[str, FieldTag]] = {
    "volumes": ("merge,retainKeys", "name"),
    "initContainers": ("merge", "name"),
    **_under("initContainers", CONTAINER),
    "containers": ("merge", "name"),
    **_under("containers", CONTAINER),
    "ephemeralContainers": ("merge", "name"),
    **_under("ephemeralContainers", CONTAINER),
    "imagePullSecrets": ("merge", "name"),
    "hostAliases": ("merge", "ip"),
    "topologySpreadConstraints": ("merge", "topologyKey"),
    "schedulingGates": ("merge", "name"),
    "resourceClaims": ("merge,retainKeys", "name"),
}

# core/v1 PodStatus
POD_STATUS: Final[Mapping[str, FieldTag]] = {
    "conditions": ("merge", "type"),
    "podIPs": ("merge", "ip"),
    "hostIPs": ("merge", "ip"),
    "resourceClaimStatuses": ("merge,retainKeys", "name"),
    **_under("initContainerStatuses", CONTAINER_STATUS),
    **_under("containerStatuses", CONTAINER_STATUS),
    **_under("ephemeralContainerStatuses", CONTAINER_STATUS),
}

# core/v1 PodTemplateSpec: shared by Pod's own shape and every workload's spec.template.
POD_TEMPLATE_SPEC: Final[Mapping[str, FieldTag]] = {
    **_under("metadata", OBJECT_META),
    **_under("spec", POD_SPEC),
}

_CONDITIONS_BY_TYPE: Final[FieldTag] = ("merge", "type")


def _workload(spec: Mapping[str, FieldTag]) -> dict[str, FieldTag]:
    return {
        **_under("metadata", OBJECT_META),
        **_under("spec.template", POD_TEMPLATE_SPEC),
        **_under("spec", spec),
        "status.conditions": _CONDITIONS_BY_TYPE,
    }


_METADATA_ONLY: Final[Mapping[str, FieldTag]] = _under("metadata", OBJECT_META)

#: kind -> field path -> (patchStrategy, patchMergeKey). Paths cross lists transparently.
PATCH_STRATEGIES: Final[Mapping[str, Mapping[str, FieldTag]]] = {
    "Pod": {**POD_TEMPLATE_SPEC, **_under("status", POD_STATUS)},
    # apps/v1 DeploymentSpec.strategy is tagged retainKeys.
    "Deployment": _workload({"strategy": ("retainKeys", "")}),
    "ReplicaSet": _workload({}),
    "StatefulSet": _workload({}),
    "DaemonSet": _workload({}),
    "Job": _workload({}),
    # batch/v1 CronJobSpec.jobTemplate holds a JobSpec: its pod template, its conditions.
    "CronJob": {
        **_METADATA_ONLY,
        **_under("spec.jobTemplate.metadata", OBJECT_META),
        **_under("spec.jobTemplate.spec.template", POD_TEMPLATE_SPEC),
    },
    "Node": {
        **_METADATA_ONLY,
        "spec.podCIDRs": ("merge", ""),
        "status.conditions": _CONDITIONS_BY_TYPE,
        "status.addresses": ("merge", "type"),
    },
    "Namespace": {**_METADATA_ONLY, "status.conditions": _CONDITIONS_BY_TYPE},
    "Service": {
        **_METADATA_ONLY,
        "spec.ports": ("merge", "port"),
        "status.conditions": _CONDITIONS_BY_TYPE,
    },
    "ConfigMap": _METADATA_ONLY,
    "Secret": _METADATA_ONLY,
    "ServiceAccount": {**_METADATA_ONLY, "secrets": ("merge", "name")},
    "Event": _METADATA_ONLY,
    "PodDisruptionBudget": {
        **_METADATA_ONLY,
        "spec.selector": ("replace", ""),
        "status.conditions": _CONDITIONS_BY_TYPE,
    },
    "Lease": _METADATA_ONLY,
    "CustomResourceDefinition": _METADATA_ONLY,
    "HorizontalPodAutoscaler": {**_METADATA_ONLY, "status.conditions": _CONDITIONS_BY_TYPE},
    "ValidatingWebhookConfiguration": {
        **_METADATA_ONLY,
        "webhooks": ("merge", "name"),
        "webhooks.matchConditions": ("merge", "name"),
    },
    "MutatingWebhookConfiguration": {
        **_METADATA_ONLY,
        "webhooks": ("merge", "name"),
        "webhooks.matchConditions": ("merge", "name"),
    },
    "Role": _METADATA_ONLY,
    "ClusterRole": _METADATA_ONLY,
    "RoleBinding": _METADATA_ONLY,
    "ClusterRoleBinding": _METADATA_ONLY,
}
