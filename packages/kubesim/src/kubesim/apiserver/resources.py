"""The resource types kubesim serves, described once as data.

Discovery, routing, storage and RBAC all read this table, so adding a resource
is one entry here (plus its defaulting, if it has any).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
# In discovery's order: kube-apiserver sorts a resource's verbs (api_installer.go).
ALL_VERBS = tuple(sorted(WRITE_VERBS + READ_VERBS))


@dataclass(frozen=True, slots=True)
class Subresource:
    name: str
    kind: str
    verbs: tuple[str, ...]
    group: str | None = None  # the Kind's group when it differs (pods/eviction -> policy)
    version: str | None = None
    # Its options come in the query, never as a body (pods/log, exec, attach, portforward).
    bodiless: bool = False


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[Subresource, ...] = ()
    categories: tuple[str, ...] = ()
    # Resources like SelfSubjectAccessReview are computed, never stored.
    virtual: bool = False
    # Which stored resource this one shares storage with (events.k8s.io/v1 events,
    # autoscaling/v1 HorizontalPodAutoscalers), as (group, plural).
    storage_of: tuple[str, str] | None = None
    has_generation: bool = False
    # A custom resource's additionalPrinterColumns (None for the built-in types).
    printer_columns: tuple[dict[str, Any], ...] | None = field(default=None, compare=False)
    has_status_subresource: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "has_status_subresource", any(s.name == "status" for s in self.subresources)
        )

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """`pods`, `deployments.apps`: how the API server names a resource in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def storage_key(self) -> tuple[str, str]:
        return self.storage_of or (self.group, self.plural)

    def subresource(self, name: str) -> Subresource | None:
        return next((s for s in self.subresources if s.name == name), None)


def _status(kind: str) -> Subresource:
    return Subresource("status", kind, ("get", "patch", "update"))


def _scale() -> Subresource:
    return Subresource("scale", "Scale", ("get", "patch", "update"), "autoscaling", "v1")


CREATE_ONLY = ("create",)

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    # core/v1
    ResourceType("", "v1", "Namespace", "namespaces", False, ("ns",),
                 ("create", "delete", "get", "list", "patch", "update", "watch"),
                 (_status("Namespace"), Subresource("finalize", "Namespace", ("update",)))),
    ResourceType("", "v1", "Node", "nodes", False, ("no",), subresources=(_status("Node"),)),
    ResourceType("", "v1", "Pod", "pods", True, ("po",),
                 subresources=(
                     _status("Pod"),
                     Subresource("eviction", "Eviction", CREATE_ONLY, "policy", "v1"),
                     Subresource("binding", "Binding", CREATE_ONLY),
                     # Answered by podlogs.py: the log from the pod's status; exec, attach
                     # and portforward refused, naming kubesim (it runs no container).
                     Subresource("log", "Pod", ("get",), bodiless=True),
                     Subresource("exec", "PodExecOptions", ("create", "get"), bodiless=True),
                     Subresource("attach", "PodAttachOptions", ("create", "get"),
                                 bodiless=True),
                     Subresource("portforward", "PodPortForwardOptions", ("create", "get"),
                                 bodiless=True),
                 ), categories=("all",)),
    ResourceType("", "v1", "Event", "events", True, ("ev",)),
    ResourceType("", "v1", "Service", "services", True, ("svc",),
                 subresources=(_status("Service"),), categories=("all",)),
    ResourceType("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",),
                 subresources=(Subresource("token", "TokenRequest", CREATE_ONLY,
                                           "authentication.k8s.io", "v1"),)),
    ResourceType("", "v1", "Secret", "secrets", True),
    ResourceType("", "v1", "ConfigMap", "configmaps", True, ("cm",)),
    # Kept by the endpoints controller (cluster/endpoints.py) for Services with a selector.
    ResourceType("", "v1", "Endpoints", "endpoints", True, ("ep",)),
    ResourceType("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True),
    # apps/v1
    ResourceType("apps", "v1", "Deployment", "deployments", True, ("deploy",),
                 subresources=(_status("Deployment"), _scale()), categories=("all",),
                 has_generation=True),
    ResourceType("apps", "v1", "ReplicaSet", "replicasets", True, ("rs",),
                 subresources=(_status("ReplicaSet"), _scale()), categories=("all",),
                 has_generation=True),
    ResourceType("apps", "v1", "StatefulSet", "statefulsets", True, ("sts",),
                 subresources=(_status("StatefulSet"), _scale()), categories=("all",),
                 has_generation=True),
    ResourceType("apps", "v1", "DaemonSet", "daemonsets", True, ("ds",),
                 subresources=(_status("DaemonSet"),), categories=("all",),
                 has_generation=True),
    ResourceType("apps", "v1", "ControllerRevision", "controllerrevisions", True),
    # autoscaling/v2, the preferred version, and v1 sharing its storage (hpa_versions.py)
    ResourceType("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                 True, ("hpa",), subresources=(_status("HorizontalPodAutoscaler"),),
                 categories=("all",)),
    ResourceType("autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                 True, ("hpa",), subresources=(_status("HorizontalPodAutoscaler"),),
                 categories=("all",), storage_of=("autoscaling", "horizontalpodautoscalers")),
    # batch/v1
    ResourceType("batch", "v1", "Job", "jobs", True, subresources=(_status("Job"),),
                 categories=("all",), has_generation=True),
    ResourceType("batch", "v1", "CronJob", "cronjobs", True, ("cj",),
                 subresources=(_status("CronJob"),), categories=("all",), has_generation=True),
    # policy/v1
    ResourceType("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",),
                 subresources=(_status("PodDisruptionBudget"),), has_generation=True),
    # events.k8s.io/v1 shares storage with core/v1 events, converted on the way.
    ResourceType("events.k8s.io", "v1", "Event", "events", True, ("ev",),
                 storage_of=("", "events")),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
    ResourceType("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
                 "validatingwebhookconfigurations", False, has_generation=True),
    # Stored and served, not enforced: kubesim evaluates no CEL.
    ResourceType("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy",
                 "validatingadmissionpolicies", False,
                 subresources=(_status("ValidatingAdmissionPolicy"),), has_generation=True),
    ResourceType("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding",
                 "validatingadmissionpolicybindings", False, has_generation=True),
    # What each CRD defines is added at run time (crds.py).
    ResourceType("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
                 "customresourcedefinitions", False, ("crd", "crds"),
                 subresources=(_status("CustomResourceDefinition"),),
                 categories=("api-extensions",), has_generation=True),
    ResourceType("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, ("pc",)),
    ResourceType("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True,
                 ("netpol",), has_generation=True),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding",
                 "clusterrolebindings", False),
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    ResourceType("authorization.k8s.io", "v1", "SelfSubjectAccessReview",
                 "selfsubjectaccessreviews", False, verbs=CREATE_ONLY, virtual=True),
    ResourceType("authorization.k8s.io", "v1", "SelfSubjectRulesReview",
                 "selfsubjectrulesreviews", False, verbs=CREATE_ONLY, virtual=True),
    ResourceType("authorization.k8s.io", "v1", "SubjectAccessReview",
                 "subjectaccessreviews", False, verbs=CREATE_ONLY, virtual=True),
    ResourceType("authentication.k8s.io", "v1", "SelfSubjectReview",
                 "selfsubjectreviews", False, verbs=CREATE_ONLY, virtual=True),
)  # fmt: skip


class ResourceRegistry:
    """Looks resource types up by (group, version, plural) and by kind."""

    def __init__(self, types: Iterable[ResourceType] = RESOURCE_TYPES) -> None:
        self._builtin = tuple(types)
        self._index(self._builtin)

    def _index(self, types: tuple[ResourceType, ...]) -> None:
        self.types = types
        self._by_path = {(t.group, t.version, t.plural): t for t in self.types}
        self._by_kind = {(t.group, t.kind): t for t in self.types if t.storage_of is None}

    def set_custom(self, types: Iterable[ResourceType]) -> None:
        """Serve these (what the CustomResourceDefinitions define) besides the built-in
        types, in place of the previous custom ones; a built-in type is never replaced."""
        taken = {(t.group, t.plural) for t in self._builtin}
        custom = tuple(t for t in types if (t.group, t.plural) not in taken)
        self._index(self._builtin + custom)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((group, kind))

    def group_versions(self) -> dict[str, list[str]]:
        """Every served group and its versions, core group ("") included."""
        out: dict[str, list[str]] = {}
        for t in self.types:
            versions = out.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self.types if t.group == group and t.version == version]

    def storage_type(self, rt: ResourceType) -> ResourceType:
        """The type whose storage `rt` shares (itself if it has its own)."""
        if rt.storage_of is None:
            return rt
        return next(t for t in self.types if t.storage_of is None
                    and (t.group, t.plural) == rt.storage_of)  # fmt: skip

    def stored(self) -> list[ResourceType]:
        return [t for t in self.types if not t.virtual and t.storage_of is None]
