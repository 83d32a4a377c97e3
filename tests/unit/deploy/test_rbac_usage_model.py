"""The (group, resource, verb) model the end-to-end RBAC audit compares with."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.audit import AuditRecord
from tests.e2e.controller.rbac_usage import describe, granted_to, used_by

SA = {"kind": "ServiceAccount", "name": "ctl", "namespace": "ops"}


def role(kind: str, name: str, rules: list[dict[str, Any]], namespace: str = "") -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": kind, "metadata": metadata, "rules": rules}


def binding(kind: str, ref_kind: str, ref: str, subjects: list[dict[str, str]],
            namespace: str = "") -> dict[str, Any]:  # fmt: skip
    metadata = {"name": f"b-{ref}", **({"namespace": namespace} if namespace else {})}
    return {"kind": kind, "metadata": metadata, "subjects": subjects,
            "roleRef": {"kind": ref_kind, "name": ref}}  # fmt: skip


READ_PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch"]}
LEASES = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["update"],
          "resourceNames": ["ctl"]}  # fmt: skip


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        ([role("ClusterRole", "r", [READ_PODS]),
          binding("ClusterRoleBinding", "ClusterRole", "r", [SA])],
         {("", "pods", "get"), ("", "pods", "watch")}),
        # a RoleBinding to a ClusterRole grants it in the binding's namespace: same pairs
        ([role("ClusterRole", "r", [READ_PODS]),
          binding("RoleBinding", "ClusterRole", "r", [SA], namespace="ops")],
         {("", "pods", "get"), ("", "pods", "watch")}),
        ([role("Role", "l", [LEASES], namespace="ops"),
          binding("RoleBinding", "Role", "l", [SA], namespace="ops")],
         {("coordination.k8s.io", "leases", "update")}),
        # a Role of another namespace, another subject, a missing role: nothing
        ([role("Role", "l", [LEASES], namespace="elsewhere"),
          binding("RoleBinding", "Role", "l", [SA], namespace="ops")], set()),
        ([role("ClusterRole", "r", [READ_PODS]),
          binding("ClusterRoleBinding", "ClusterRole", "r", [{**SA, "name": "other"}])], set()),
        ([binding("ClusterRoleBinding", "ClusterRole", "missing", [SA])], set()),
        # a subject without a namespace takes its RoleBinding's
        ([role("Role", "l", [LEASES], namespace="ops"),
          binding("RoleBinding", "Role", "l", [{"kind": "ServiceAccount", "name": "ctl"}],
                  namespace="ops")],
         {("coordination.k8s.io", "leases", "update")}),
    ],
)  # fmt: skip
def test_granted_to(objects: list[dict[str, Any]], expected: set[tuple[str, str, str]]) -> None:
    assert granted_to(objects, "ops", "ctl") == expected


def record(verb: str, group: str, resource: str, subresource: str = "") -> AuditRecord:
    return AuditRecord("t", "u", (), verb, group, resource, subresource, "n", "ns", 200, "/")


def test_used_by_and_describe() -> None:
    used = used_by([record("get", "", "pods"), record("create", "", "pods", "eviction"),
                    record("get", "", "")])  # fmt: skip
    assert used == {("", "pods", "get"), ("", "pods/eviction", "create")}
    assert describe(used) == ["create core/pods/eviction", "get core/pods"]
