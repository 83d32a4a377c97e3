"""What the shipped RBAC must grant the controller's ServiceAccount, and nothing more.

`expected_allowed` is the reference: the requests the controller makes (docs/decisions.md,
docs/install.md "RBAC") and no other. `CASES` spells out the boundary rows by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.unit.deploy.rendered import NAMESPACE, Variant

LEASE = "graceful-drain"
TLS_SECRET = "graceful-drain-webhook-tls"
CA_SECRET = "graceful-drain-webhook-tls-ca"
WEBHOOK_CONFIGURATION = "graceful-drain"

READ = frozenset({"get", "list", "watch"})
VERBS = (
    "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
    "escalate", "bind", "impersonate", "approve", "sign", "use", "proxy",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Request:
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def describe(self) -> str:
        where = f" in {self.namespace}" if self.namespace else " cluster-wide"
        resource = self.resource + (f"/{self.subresource}" if self.subresource else "")
        return f"{self.verb} {self.group or 'core'}/{resource} {self.name!r}{where}"


def expected_allowed(variant: Variant, request: Request) -> bool:
    verb = request.verb
    target = (request.group, request.resource, request.subresource)
    own_namespace = request.namespace == NAMESPACE
    if target == ("", "pods", ""):  # informer + live GET of a pod missing from the cache
        return verb in READ
    if target == ("apps", "replicasets", ""):  # owner resolution; live GET while cold
        return verb in READ
    if target == ("", "nodes", ""):  # which nodes are being drained: read only, no get
        return verb in {"list", "watch"}
    if target == ("apps", "deployments", ""):  # restarted-at and restartedAt: patches only
        return verb in READ | {"patch"}
    if target == ("", "events", ""):
        return verb in {"create", "patch"}
    if target == ("coordination.k8s.io", "leases", "") and own_namespace:
        return verb == "create" or (verb in {"get", "update"} and request.name == LEASE)
    if not variant.self_signed:
        return False
    if target == ("", "secrets", "") and own_namespace:
        return verb == "create" or (
            verb in READ | {"update"} and request.name in (TLS_SECRET, CA_SECRET)
        )  # list/watch by a metadata.name field selector: the request carries the name
    if target == ("admissionregistration.k8s.io", "validatingwebhookconfigurations", ""):
        return verb in {"list", "watch", "patch"} and request.name == WEBHOOK_CONFIGURATION
    return False


# Hand-picked rows around every boundary (verb, scope, name, subresource).
CASES: tuple[Request, ...] = (
    Request("list", "", "pods"),
    Request("watch", "", "pods", namespace="default"),
    Request("get", "", "pods", namespace="default", name="web-1"),
    Request("delete", "", "pods", namespace="default", name="web-1"),
    Request("create", "", "pods", "eviction", namespace="default", name="web-1"),
    Request("patch", "", "pods", "status", namespace="default", name="web-1"),
    Request("list", "apps", "replicasets"),
    Request("get", "apps", "replicasets", namespace="default", name="web-1"),
    Request("patch", "apps", "replicasets", namespace="default", name="web-1"),
    Request("patch", "apps", "deployments", namespace="default", name="web"),
    Request("update", "apps", "deployments", namespace="default", name="web"),
    Request("patch", "apps", "deployments", "scale", namespace="default", name="web"),
    Request("delete", "apps", "deployments", namespace="default", name="web"),
    Request("create", "", "events", namespace="default"),
    Request("patch", "", "events", namespace="default", name="web.1"),
    Request("create", "events.k8s.io", "events", namespace="default"),
    Request("create", "coordination.k8s.io", "leases", namespace=NAMESPACE),
    Request("update", "coordination.k8s.io", "leases", namespace=NAMESPACE, name=LEASE),
    Request("update", "coordination.k8s.io", "leases", namespace=NAMESPACE, name="other"),
    Request("create", "coordination.k8s.io", "leases", namespace="kube-system"),
    Request("create", "", "secrets", namespace=NAMESPACE),
    Request("get", "", "secrets", namespace=NAMESPACE, name=TLS_SECRET),
    Request("update", "", "secrets", namespace=NAMESPACE, name=TLS_SECRET),
    Request("get", "", "secrets", namespace=NAMESPACE, name="graceful-drain-token"),
    Request("list", "", "secrets", namespace=NAMESPACE),
    Request("get", "", "secrets", namespace="default", name=TLS_SECRET),
    Request("list", "", "secrets"),
    Request("get", "admissionregistration.k8s.io", "validatingwebhookconfigurations",
            name=WEBHOOK_CONFIGURATION),
    Request("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations",
            name=WEBHOOK_CONFIGURATION),
    Request("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations",
            name="someone-else"),
    Request("list", "admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    Request("patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations",
            name=WEBHOOK_CONFIGURATION),
    Request("escalate", "rbac.authorization.k8s.io", "clusterroles", name="graceful-drain"),
    Request("get", "", "nodes", name="node-1"),
    Request("list", "", "nodes"),
    Request("watch", "", "nodes"),
    Request("patch", "", "nodes", name="node-1"),
)  # fmt: skip
