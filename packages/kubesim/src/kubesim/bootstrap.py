"""What a fresh cluster holds before anyone writes: namespaces, bootstrap RBAC and (for
`kubesim serve`) the `default/kubernetes` Service with its Endpoints and EndpointSlice.

The RBAC objects mirror plugin/pkg/auth/authorizer/rbac/bootstrappolicy upstream
for the roles clients rely on (cluster-admin, discovery, basic-user, public-info,
service-account-issuer-discovery).
"""

from __future__ import annotations

from kubesim.types import Obj

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _cluster_role(name: str, rules: list[Obj]) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "rules": rules,
    }


def _binding(name: str, role: str, groups: list[str]) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups
        ],
    }


def rbac_objects() -> list[Obj]:
    return [
        _cluster_role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        _binding("cluster-admin", "cluster-admin", ["system:masters"]),
        _cluster_role(
            "system:discovery",
            [
                {
                    "nonResourceURLs": [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/healthz",
                        "/livez",
                        "/openapi",
                        "/openapi/*",
                        "/readyz",
                        "/version",
                        "/version/",
                    ],
                    "verbs": ["get"],
                }
            ],
        ),
        _binding("system:discovery", "system:discovery", ["system:authenticated"]),
        _cluster_role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                },
            ],
        ),
        _binding("system:basic-user", "system:basic-user", ["system:authenticated"]),
        _cluster_role(
            "system:public-info-viewer",
            [
                {
                    "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"],
                }
            ],
        ),
        _binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            ["system:authenticated", "system:unauthenticated"],
        ),
        _cluster_role(
            "system:service-account-issuer-discovery",
            [
                {
                    "nonResourceURLs": [
                        "/.well-known/openid-configuration",
                        "/.well-known/openid-configuration/",
                        "/openid/v1/jwks",
                        "/openid/v1/jwks/",
                    ],
                    "verbs": ["get"],
                }
            ],
        ),
        _binding(
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            ["system:serviceaccounts"],
        ),
    ]


def kubernetes_service(host: str, port: int) -> list[Obj]:
    """The API server's own Service, as kube-apiserver's bootstrap controller keeps it
    (pkg/controlplane/controller/kubernetesservice): port 443 `https` to the serving port,
    with an Endpoints and an EndpointSlice of its address. kubesim allocates no cluster IP."""
    meta = {"name": "kubernetes", "namespace": "default"}
    ports = [{"name": "https", "port": port, "protocol": "TCP"}]
    return [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {**meta, "labels": {"component": "apiserver", "provider": "kubernetes"}},
         "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP",
                             "targetPort": port}],
                  "type": "ClusterIP", "sessionAffinity": "None",
                  "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                  "internalTrafficPolicy": "Cluster"}},
        {"apiVersion": "v1", "kind": "Endpoints",
         "metadata": {**meta, "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
         "subsets": [{"addresses": [{"ip": host}], "ports": ports}]},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {**meta, "labels": {"kubernetes.io/service-name": "kubernetes"}},
         "addressType": "IPv4",
         "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
         "ports": ports},
    ]  # fmt: skip
