"""One object of every resource kubesim serves, made the same way on both servers, for the
differential suite's `kubectl get <r>` header comparison (`test_kubectl_tables.py`).

Namespaced objects live in the test's namespace; cluster-scoped ones carry the test's
suffix in their name, are made so that they change nothing for anyone else (a webhook
configuration with no webhooks, a policy matching a resource nobody serves, roles granting
nothing) and are deleted afterwards.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

POD_SPEC: Obj = {"containers": [{"name": "web", "image": "nginx:1.27"}]}
LABELS = {"app": "every"}


def _template() -> Obj:
    return {"metadata": {"labels": dict(LABELS)}, "spec": POD_SPEC}


def namespaced(namespace: str) -> list[Obj]:
    meta = {"name": "every", "namespace": namespace}
    selector = {"matchLabels": dict(LABELS)}
    return [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta, "labels": dict(LABELS)},
         "spec": POD_SPEC},
        {"apiVersion": "v1", "kind": "Event", "metadata": meta, "type": "Normal",
         "reason": "Seen", "message": "seen",
         "involvedObject": {"kind": "Pod", "name": "every", "namespace": namespace}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": dict(LABELS), "ports": [{"port": 80}]}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": {"k": "v"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": 1, "selector": selector, "template": _template()}},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {**meta, "name": "every-rs"},
         "spec": {"replicas": 0, "selector": {"matchLabels": {"rs": "every"}},
                  "template": {"metadata": {"labels": {"rs": "every"}}, "spec": POD_SPEC}}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
         "spec": {"replicas": 0, "serviceName": "every", "selector": {"matchLabels": {"sts": "e"}},
                  "template": {"metadata": {"labels": {"sts": "e"}}, "spec": POD_SPEC}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
         "spec": {"selector": {"matchLabels": {"ds": "e"}},
                  "template": {"metadata": {"labels": {"ds": "e"}},
                               "spec": {**POD_SPEC, "nodeSelector": {"every": "none"}}}}},
        {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta,
         "revision": 1, "data": {}},
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta,
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": "every"},
                  "minReplicas": 1, "maxReplicas": 2,
                  "metrics": [{"type": "Resource", "resource": {
                      "name": "cpu", "target": {"type": "Utilization",
                                                "averageUtilization": 50}}}]}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
         "spec": {"suspend": True, "template": {"spec": {**POD_SPEC,
                                                         "restartPolicy": "Never"}}}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
         "spec": {"schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {"spec": {
             "template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}}}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
         "spec": {"minAvailable": 1, "selector": selector}},
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
         "spec": {"holderIdentity": "someone"}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta,
         "spec": {"podSelector": selector}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": []},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "every"},
         "subjects": [{"kind": "ServiceAccount", "name": "every", "namespace": namespace}]},
    ]  # fmt: skip


def cluster_scoped(suffix: str) -> list[Obj]:
    name = f"every-{suffix}"
    group = f"every-{suffix}.example.com"
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1",
         "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name}, "webhooks": []},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": name},
         "spec": {"failurePolicy": "Ignore",
                  "matchConstraints": {"resourceRules": [{
                      "apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"],
                      "resources": ["nothings"]}]},
                  "validations": [{"expression": "true"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1",
         "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
         "metadata": {"name": f"nothings.{group}"},
         "spec": {"group": group, "scope": "Namespaced",
                  "names": {"plural": "nothings", "kind": "Nothing"},
                  "versions": [{"name": "v1", "served": True, "storage": True,
                                "schema": {"openAPIV3Schema": {"type": "object"}}}]}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": 7},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name}, "rules": []},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": [{"kind": "Group", "name": "nobody"}]},
    ]  # fmt: skip
