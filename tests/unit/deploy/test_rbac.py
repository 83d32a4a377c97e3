"""The shipped RBAC: least privilege, checked rule by rule and through kubesim's port of
the upstream RBAC authorizer (plugin/pkg/auth/authorizer/rbac/rbac.go)."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.apiserver.auth import UserInfo, service_account_user
from kubesim.apiserver.rbac import RBACAuthorizer, resource_request
from tests.unit.deploy.rbac_expectations import (
    CASES,
    LEASE,
    TLS_SECRET,
    VERBS,
    WEBHOOK_CONFIGURATION,
    Request,
    expected_allowed,
)
from tests.unit.deploy.rendered import (
    NAMESPACE,
    SERVICE_ACCOUNT,
    Obj,
    Variant,
    by_variant,
    objects,
)

RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
CONTROLLER = service_account_user(NAMESPACE, SERVICE_ACCOUNT)


def _rbac(variant: Variant) -> list[Obj]:
    return [item for item in objects(variant) if item["kind"] in RBAC_KINDS]


def _rules(variant: Variant) -> list[tuple[Obj, Obj]]:
    return [
        (role, rule)
        for role in _rbac(variant)
        if role["kind"] in ("Role", "ClusterRole")
        for rule in role["rules"]
    ]


def _authorize(authorizer: RBACAuthorizer, user: UserInfo, request: Request) -> bool:
    attributes = resource_request(
        user,
        request.verb,
        request.resource,
        namespace=request.namespace,
        api_group=request.group,
        subresource=request.subresource,
        name=request.name,
    )
    return authorizer.authorize(attributes).allowed


@by_variant
def test_no_wildcards_and_no_non_resource_urls(variant: Variant) -> None:
    for role, rule in _rules(variant):
        for field_name in ("verbs", "apiGroups", "resources", "resourceNames"):
            assert "*" not in rule.get(field_name, []), (role["metadata"]["name"], rule)
        assert "nonResourceURLs" not in rule
        assert all("*" not in resource for resource in rule["resources"])


@by_variant
def test_no_cluster_wide_secrets_and_no_escalation(variant: Variant) -> None:
    for role, rule in _rules(variant):
        if role["kind"] == "ClusterRole":
            assert "secrets" not in rule["resources"], rule
        assert not {"escalate", "bind", "impersonate", "delete", "deletecollection"} & set(
            rule["verbs"]
        ), rule
        if "deployments" in rule["resources"]:
            assert "update" not in rule["verbs"], "the controller only patches Deployments"


@by_variant
def test_bindings_name_only_the_controller_service_account(variant: Variant) -> None:
    items = _rbac(variant)
    roles = {(r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"]) for r in items}
    bindings = [b for b in items if b["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert bindings
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
        ]
        ref = binding["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        namespace = None if ref["kind"] == "ClusterRole" else binding["metadata"]["namespace"]
        assert (ref["kind"], namespace, ref["name"]) in roles
        # A namespaced Role only through a RoleBinding, a ClusterRole only cluster-wide.
        assert (binding["kind"] == "ClusterRoleBinding") == (ref["kind"] == "ClusterRole")


@by_variant
def test_name_restricted_rules_cover_every_verb_but_create(variant: Variant) -> None:
    restricted = {
        ("coordination.k8s.io", "leases"): LEASE,
        ("", "secrets"): TLS_SECRET,
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): WEBHOOK_CONFIGURATION,
    }
    for _, rule in _rules(variant):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                name = restricted.get((group, resource))
                if name is None:
                    continue
                if rule["verbs"] == ["create"]:
                    # A create request has no name: resourceNames cannot apply to it.
                    assert "resourceNames" not in rule
                elif resource == "secrets":
                    assert rule["resourceNames"] == [name, f"{name}-ca"], rule
                else:
                    assert rule["resourceNames"] == [name], rule


@by_variant
@pytest.mark.parametrize("request_", CASES, ids=[case.describe() for case in CASES])
def test_authorizer_grants_exactly_what_the_controller_uses(
    variant: Variant, request_: Request
) -> None:
    assert _authorize(_authorizer(variant), CONTROLLER, request_) == expected_allowed(
        variant, request_
    )


@functools.cache
def _authorizer(variant: Variant) -> RBACAuthorizer:
    return RBACAuthorizer(_rbac(variant))


_RESOURCES: tuple[tuple[str, str, str], ...] = (
    ("", "pods", ""), ("", "pods", "eviction"), ("", "pods", "status"), ("", "pods", "log"),
    ("apps", "replicasets", ""), ("apps", "deployments", ""), ("apps", "deployments", "scale"),
    ("apps", "deployments", "status"), ("apps", "statefulsets", ""), ("", "events", ""),
    ("events.k8s.io", "events", ""), ("coordination.k8s.io", "leases", ""),
    ("", "secrets", ""), ("", "configmaps", ""), ("", "serviceaccounts", "token"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations", ""),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", ""),
    ("rbac.authorization.k8s.io", "clusterroles", ""), ("", "nodes", ""), ("", "nodes", "proxy"),
)  # fmt: skip


def _request(target: tuple[str, str, str], verb: str, namespace: str, name: str) -> Request:
    group, resource, subresource = target
    return Request(verb, group, resource, subresource, namespace, name)


_requests = st.builds(
    _request,
    st.sampled_from(_RESOURCES),
    st.sampled_from(VERBS),
    st.sampled_from(["", NAMESPACE, "default", "kube-system"]),
    st.sampled_from(["", LEASE, TLS_SECRET, "other", "graceful-drain-token"]),
)
_others = st.sampled_from(
    [
        service_account_user(NAMESPACE, "default"),
        service_account_user("default", SERVICE_ACCOUNT),
        UserInfo("system:serviceaccount:graceful-drain:graceful-drain"),  # no groups: same user
    ]
)


@by_variant
@settings(max_examples=500)
@given(request_=_requests)
def test_property_controller_gets_only_the_reference_grants(
    variant: Variant, request_: Request
) -> None:
    assert _authorize(_authorizer(variant), CONTROLLER, request_) == expected_allowed(
        variant, request_
    )


@by_variant
@settings(max_examples=300)
@given(request_=_requests, user=_others)
def test_property_nobody_else_gains_anything(
    variant: Variant, request_: Request, user: UserInfo
) -> None:
    allowed = _authorize(_authorizer(variant), user, request_)
    if user.username == CONTROLLER.username:
        assert allowed == expected_allowed(variant, request_)
    else:
        assert not allowed
