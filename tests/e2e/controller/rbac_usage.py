"""What RBAC grants a ServiceAccount, and what its requests used, as (group, resource, verb).

`granted_to` reads Roles, ClusterRoles and their bindings (as `kubectl get -o json` lists
them) and expands every rule bound to the ServiceAccount; `used_by` reads audit records.
resourceNames narrow a rule but not the pair it grants, so they are compared separately by
the RBAC tests themselves (a request outside them is answered 403, which the audit shows).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubesim.apiserver.audit import AuditRecord

Obj = dict[str, Any]
Pair = tuple[str, str, str]  # (API group, resource[/subresource], verb)


def _binds(binding: Obj, namespace: str, name: str) -> bool:
    return any(
        subject.get("kind") == "ServiceAccount"
        and subject.get("name") == name
        and subject.get("namespace", binding["metadata"].get("namespace")) == namespace
        for subject in binding.get("subjects") or []
    )


def granted_to(objects: Iterable[Obj], namespace: str, name: str) -> set[Pair]:
    """Every pair a rule bound to ServiceAccount namespace/name grants (wildcards kept as '*')."""
    items = list(objects)
    roles = {
        (item["kind"], item["metadata"].get("namespace", ""), item["metadata"]["name"]): item
        for item in items
        if item.get("kind") in ("Role", "ClusterRole")
    }
    pairs: set[Pair] = set()
    for binding in items:
        if binding.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not _binds(binding, namespace, name):
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        role = roles.get((ref["kind"], scope, ref["name"]))
        if role is None:
            continue
        for rule in role.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        pairs.add((group, resource, verb))
    return pairs


def used_by(records: Iterable[AuditRecord]) -> set[Pair]:
    """The pairs of the resource requests in `records` (discovery and other paths left out)."""
    return {
        (r.api_group, r.resource + (f"/{r.subresource}" if r.subresource else ""), r.verb)
        for r in records
        if r.resource
    }


def describe(pairs: Iterable[Pair]) -> list[str]:
    return sorted(f"{verb} {group or 'core'}/{resource}" for group, resource, verb in pairs)
