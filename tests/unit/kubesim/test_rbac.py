"""The RBAC authorizer and 403 texts against upstream behaviour.

Tables are ported from plugin/pkg/auth/authorizer/rbac/rbac_test.go
(TestAuthorizer, TestRuleMatches); messages follow
responsewriters/errors.go and apierrors.NewForbidden.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.apiserver.auth import UserInfo
from kubesim.apiserver.rbac import (
    AuthorizationDecision,
    RBACAuthorizer,
    RequestAttributes,
    forbidden_message,
    forbidden_status,
    non_resource_request,
    resource_request,
    rule_allows,
)

Obj = dict[str, Any]


def rule(
    verbs: str,
    api_groups: str | None = None,
    resources: str | None = None,
    urls: str | None = None,
    names: str | None = None,
) -> Obj:
    """newRule from rbac_test.go: comma lists ("" is the core group); None leaves a field out."""
    fields = {
        "verbs": verbs,
        "apiGroups": api_groups,
        "resources": resources,
        "nonResourceURLs": urls,
        "resourceNames": names,
    }
    return {key: value.split(",") for key, value in fields.items() if value is not None}


def cluster_role(name: str, *rules: Obj) -> Obj:
    return {"kind": "ClusterRole", "metadata": {"name": name}, "rules": list(rules)}


def role(namespace: str, name: str, *rules: Obj) -> Obj:
    return {
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": list(rules),
    }


def subjects(*specs: str) -> list[Obj]:
    """ "User:alice", "Group:admins", "ServiceAccount:ns/name" or "ServiceAccount:name"."""
    out = []
    for spec in specs:
        kind, name = spec.split(":", 1)
        subject: Obj = {"kind": kind, "name": name}
        if kind == "ServiceAccount" and "/" in name:
            subject["namespace"], subject["name"] = name.split("/", 1)
        out.append(subject)
    return out


def cluster_role_binding(name: str, role_name: str, *specs: str) -> Obj:
    return {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role_name,
        },
        "subjects": subjects(*specs),
    }


def role_binding(namespace: str, name: str, role_kind: str, role_name: str, *specs: str) -> Obj:
    return {
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": subjects(*specs),
    }


def user(name: str, *groups: str) -> UserInfo:
    return UserInfo(name, groups)


# --- TestAuthorizer ---

AuthorizerCase = tuple[list[Obj], list[RequestAttributes], list[RequestAttributes]]

AUTHORIZER_CASES: list[AuthorizerCase] = [
    (
        [
            cluster_role("admin", rule("*", "*", "*", "*")),
            role_binding("ns1", "b", "ClusterRole", "admin", "User:admin", "Group:admins"),
        ],
        [
            resource_request(user("admin", ""), "get", "Pods", namespace="ns1"),
            resource_request(user("admin", ""), "watch", "Pods", namespace="ns1"),
            resource_request(user("admin", "group1"), "watch", "Foobar", namespace="ns1"),
            resource_request(user("joe", "admins"), "watch", "Foobar", namespace="ns1"),
            resource_request(user("joe", "group1", "admins"), "watch", "Foobar", namespace="ns1"),
        ],
        [
            resource_request(user("admin", ""), "GET", "Pods", namespace="ns2"),
            resource_request(user("admin", ""), "GET", "Nodes"),
            resource_request(user("admin", "admins"), "GET", "Pods", namespace="ns2"),
            resource_request(user("admin", "admins"), "GET", "Nodes"),
        ],
    ),
    (
        [
            cluster_role("non-resource-url-getter", rule("get", urls="/apis")),
            cluster_role("non-resource-url", rule("*", urls="/apis")),
            cluster_role("non-resource-url-prefix", rule("get", urls="/apis/*")),
            cluster_role_binding("b1", "non-resource-url-getter", "User:foo", "Group:bar"),
            cluster_role_binding("b2", "non-resource-url", "User:admin", "Group:admin"),
            cluster_role_binding(
                "b3", "non-resource-url-prefix", "User:prefixed", "Group:prefixed"
            ),
        ],
        [
            non_resource_request(user("foo"), "get", "/apis"),
            non_resource_request(user("", "bar"), "get", "/apis"),
            non_resource_request(user("admin"), "get", "/apis"),
            non_resource_request(user("", "admin"), "get", "/apis"),
            non_resource_request(user("admin"), "watch", "/apis"),
            non_resource_request(user("", "admin"), "watch", "/apis"),
            non_resource_request(user("prefixed"), "get", "/apis/v1"),
            non_resource_request(user("", "prefixed"), "get", "/apis/v1"),
            non_resource_request(user("prefixed"), "get", "/apis/v1/foobar"),
            non_resource_request(user("", "prefixed"), "get", "/apis/v1/foorbar"),
        ],
        [
            non_resource_request(user("foo"), "watch", "/apis"),
            non_resource_request(user("", "bar"), "watch", "/apis"),
            non_resource_request(user("foo"), "get", "/api/v1"),
            non_resource_request(user("", "bar"), "get", "/api/v1"),
            non_resource_request(user("admin"), "get", "/api/v1"),
            non_resource_request(user("", "admin"), "get", "/api/v1"),
            non_resource_request(user("prefixed"), "get", "/api/v1"),
            non_resource_request(user("", "prefixed"), "get", "/api/v1"),
        ],
    ),
    (
        [
            cluster_role("admin", rule("*", "*", "pods", "*")),
            role_binding("ns1", "b", "ClusterRole", "admin", "User:admin", "Group:admins"),
        ],
        [resource_request(user("admin"), "get", "pods", namespace="ns1")],
        [resource_request(user("admin"), "get", "pods", namespace="ns1", subresource="status")],
    ),
    (
        [
            cluster_role("admin", rule("*", "*", "pods/status", "*")),
            role_binding("ns1", "b", "ClusterRole", "admin", "User:admin", "Group:admins"),
        ],
        [resource_request(user("admin"), "get", "pods", namespace="ns1", subresource="status")],
        [resource_request(user("admin"), "get", "pods", namespace="ns1")],
    ),
]


@pytest.mark.parametrize(("objects", "should_pass", "should_fail"), AUTHORIZER_CASES)
def test_authorizer_cases_from_upstream(
    objects: list[Obj], should_pass: list[RequestAttributes], should_fail: list[RequestAttributes]
) -> None:
    authorizer = RBACAuthorizer(objects)
    for attrs in should_pass:
        assert authorizer.authorize(attrs).allowed, attrs
    for attrs in should_fail:
        assert not authorizer.authorize(attrs).allowed, attrs


# --- TestRuleMatches, plus subresource wildcards and resourceNames ---


def res(
    verb: str, group: str, resource: str, subresource: str = "", name: str = ""
) -> RequestAttributes:
    return resource_request(
        user("u"), verb, resource, api_group=group, subresource=subresource, name=name
    )


def url(verb: str, path: str) -> RequestAttributes:
    return non_resource_request(user("u"), verb, path)


RULE_CASES: list[tuple[str, Obj, list[tuple[RequestAttributes, bool]]]] = [
    (
        "star verb, exact match other",
        rule("*", "group1", "resource1"),
        [
            (res("verb1", "group1", "resource1"), True),
            (res("verb1", "group2", "resource1"), False),
            (res("verb1", "group1", "resource2"), False),
            (res("verb2", "group1", "resource1"), True),
            (res("verb2", "group2", "resource2"), False),
        ],
    ),
    (
        "star group, exact match other",
        rule("verb1", "*", "resource1"),
        [
            (res("verb1", "group1", "resource1"), True),
            (res("verb1", "group2", "resource1"), True),
            (res("verb1", "group1", "resource2"), False),
            (res("verb2", "group1", "resource1"), False),
        ],
    ),
    (
        "star resource, exact match other",
        rule("verb1", "group1", "*"),
        [
            (res("verb1", "group1", "resource1"), True),
            (res("verb1", "group2", "resource1"), False),
            (res("verb1", "group1", "resource2"), True),
            (res("verb1", "group1", "resource2", "sub"), True),
            (res("verb2", "group1", "resource1"), False),
        ],
    ),
    (
        "tuple expansion",
        rule("verb1,verb2", "group1,group2", "resource1,resource2"),
        [
            (res(verb, group, resource), True)
            for verb in ("verb1", "verb2")
            for group in ("group1", "group2")
            for resource in ("resource1", "resource2")
        ],
    ),
    (
        "subresource expansion",
        rule("*", "*", "resource1/subresource1"),
        [
            (res("verb1", "group1", "resource1", "subresource1"), True),
            (res("verb1", "group2", "resource1", "subresource2"), False),
            (res("verb1", "group1", "resource2", "subresource1"), False),
            (res("verb2", "group1", "resource1", "subresource1"), True),
            (res("verb2", "group1", "resource1"), False),
        ],
    ),
    (
        "star subresource",
        rule("get,update", "*", "*/scale"),
        [
            (res("get", "apps", "deployments", "scale"), True),
            (res("update", "", "replicationcontrollers", "scale"), True),
            (res("get", "apps", "deployments"), False),
            (res("get", "apps", "deployments", "status"), False),
            (res("get", "apps", "deployments", "scalex"), False),
        ],
    ),
    (
        "eviction subresource",
        rule("create", "", "pods/eviction"),
        [
            (res("create", "", "pods", "eviction", "web-1"), True),
            (res("create", "", "pods", name="web-1"), False),
            (res("create", "policy", "pods", "eviction", "web-1"), False),
        ],
    ),
    (
        "resource names",
        rule("get,list,create,delete,deletecollection", "", "pods", names="web-1"),
        [
            (res("get", "", "pods", name="web-1"), True),
            (res("delete", "", "pods", name="web-1"), True),
            (res("get", "", "pods", name="web-2"), False),
            # list, create and deletecollection carry no name: resourceNames never allow them
            (res("list", "", "pods"), False),
            (res("create", "", "pods"), False),
            (res("deletecollection", "", "pods"), False),
        ],
    ),
    (
        "star nonresource, exact match other",
        rule("verb1", urls="*"),
        [
            (url("verb1", "/foo"), True),
            (url("verb1", "/foo/bar/one"), True),
            (url("verb2", "/foo"), False),
        ],
    ),
    (
        "star nonresource subpath",
        rule("verb1", urls="/foo/*"),
        [
            (url("verb1", "/foo"), False),
            (url("verb1", "/foo/bar"), True),
            (url("verb1", "/foo/baz/one"), True),
            (url("verb1", "/notfoo"), False),
            (url("verb1", "/notfoo/bar"), False),
        ],
    ),
    (
        "star verb, exact nonresource",
        rule("*", urls="/foo,/foo/bar/one"),
        [
            (url("verb1", "/foo"), True),
            (url("verb1", "/foo/bar"), False),
            (url("verb1", "/foo/bar/one"), True),
            (url("verb2", "/foo"), True),
        ],
    ),
    (
        "resource rules never match non-resource requests",
        rule("*", "*", "*"),
        [(url("get", "/healthz"), False), (res("get", "", "pods"), True)],
    ),
    (
        "non-resource rules never match resource requests",
        rule("*", urls="*"),
        [(url("get", "/healthz"), True), (res("get", "", "pods"), False)],
    ),
]


@pytest.mark.parametrize(
    ("rule_obj", "attrs", "expected"),
    [
        pytest.param(rule_obj, attrs, expected, id=f"{name}-{index}")
        for name, rule_obj, requests in RULE_CASES
        for index, (attrs, expected) in enumerate(requests)
    ],
)
def test_rule_matching_like_upstream(
    rule_obj: Obj, attrs: RequestAttributes, expected: bool
) -> None:
    assert rule_allows(attrs, rule_obj) is expected


# --- subjects, scopes, reasons ---

EVICTOR = cluster_role("evictor", rule("create", "", "pods/eviction"))


@pytest.mark.parametrize(
    ("binding", "requester", "allowed", "reason"),
    [
        (
            role_binding("default", "evict", "ClusterRole", "evictor", "ServiceAccount:gd/ctl"),
            UserInfo.service_account("gd", "ctl"),
            True,
            'RBAC: allowed by RoleBinding "evict/default" of ClusterRole "evictor" '
            'to ServiceAccount "ctl/gd"',
        ),
        (
            # a ServiceAccount subject without namespace means the binding's namespace
            role_binding("default", "evict", "ClusterRole", "evictor", "ServiceAccount:ctl"),
            UserInfo.service_account("default", "ctl"),
            True,
            'RBAC: allowed by RoleBinding "evict/default" of ClusterRole "evictor" '
            'to ServiceAccount "ctl/default"',
        ),
        (
            role_binding("default", "evict", "ClusterRole", "evictor", "ServiceAccount:ctl"),
            UserInfo.service_account("gd", "ctl"),
            False,
            "",
        ),
        (
            role_binding(
                "default", "evict", "ClusterRole", "evictor", "Group:system:serviceaccounts:gd"
            ),
            UserInfo.service_account("gd", "ctl"),
            True,
            'RBAC: allowed by RoleBinding "evict/default" of ClusterRole "evictor" '
            'to Group "system:serviceaccounts:gd"',
        ),
        (
            cluster_role_binding("evict", "evictor", "Group:system:serviceaccounts"),
            UserInfo.service_account("gd", "ctl"),
            True,
            'RBAC: allowed by ClusterRoleBinding "evict" of ClusterRole "evictor" '
            'to Group "system:serviceaccounts"',
        ),
        (
            cluster_role_binding("evict", "evictor", "Group:system:authenticated"),
            UserInfo.service_account("gd", "ctl"),
            True,
            'RBAC: allowed by ClusterRoleBinding "evict" of ClusterRole "evictor" '
            'to Group "system:authenticated"',
        ),
        (
            # a ClusterRoleBinding has no namespace to default a ServiceAccount to
            cluster_role_binding("evict", "evictor", "ServiceAccount:ctl"),
            UserInfo.service_account("gd", "ctl"),
            False,
            "",
        ),
        (
            cluster_role_binding(
                "evict", "evictor", "User:alice", "User:system:serviceaccount:gd:ctl"
            ),
            UserInfo.service_account("gd", "ctl"),
            True,
            'RBAC: allowed by ClusterRoleBinding "evict" of ClusterRole "evictor" '
            'to User "system:serviceaccount:gd:ctl"',
        ),
        (
            role_binding("other", "evict", "ClusterRole", "evictor", "User:alice"),
            user("alice"),
            False,
            "",
        ),
    ],
)
def test_subjects_and_allow_reasons(
    binding: Obj, requester: UserInfo, allowed: bool, reason: str
) -> None:
    authorizer = RBACAuthorizer([EVICTOR, binding])
    attrs = resource_request(
        requester, "create", "pods", namespace="default", subresource="eviction", name="web-1"
    )
    assert authorizer.authorize(attrs) == AuthorizationDecision(allowed, reason)


def test_service_account_user_carries_the_authenticator_groups() -> None:
    assert UserInfo.service_account("gd", "ctl") == UserInfo(
        "system:serviceaccount:gd:ctl",
        ("system:serviceaccounts", "system:serviceaccounts:gd", "system:authenticated"),
    )


def test_system_masters_is_allowed_everything_with_no_reason() -> None:
    authorizer = RBACAuthorizer()
    assert authorizer.authorize(
        non_resource_request(user("root", "system:masters"), "delete", "/x")
    ) == AuthorizationDecision(True, "")
    assert authorizer.authorize(
        resource_request(user("root", "system:masters"), "escalate", "roles")
    ).allowed
    assert not authorizer.authorize(
        resource_request(user("root", "masters"), "get", "pods")
    ).allowed


def test_role_bindings_use_roles_of_their_own_namespace_only() -> None:
    authorizer = RBACAuthorizer(
        [
            role("ns1", "reader", rule("get", "", "pods")),
            role_binding("ns2", "read", "Role", "reader", "User:alice"),
        ]
    )
    attrs = resource_request(user("alice"), "get", "pods", namespace="ns2")
    assert authorizer.authorize(attrs) == AuthorizationDecision(
        False, 'RBAC: role.rbac.authorization.k8s.io "reader" not found'
    )


def test_role_bindings_never_grant_cluster_scope() -> None:
    authorizer = RBACAuthorizer(
        [
            cluster_role("reader", rule("list", "", "pods")),
            role_binding("ns1", "read", "ClusterRole", "reader", "User:alice"),
        ]
    )
    assert authorizer.authorize(
        resource_request(user("alice"), "list", "pods", namespace="ns1")
    ).allowed
    assert not authorizer.authorize(resource_request(user("alice"), "list", "pods")).allowed


def test_denial_reason_aggregates_resolution_errors_of_applicable_bindings() -> None:
    authorizer = RBACAuthorizer(
        [
            cluster_role_binding("a", "gone", "User:alice"),
            cluster_role_binding("b", "gone", "Group:devs"),
            cluster_role_binding("c", "also-gone", "User:alice"),
            cluster_role_binding("d", "ignored", "User:bob"),
            role_binding("ns1", "e", "Policy", "x", "User:alice"),
        ]
    )
    attrs = resource_request(user("alice", "devs"), "get", "pods", namespace="ns1")
    assert authorizer.authorize(attrs) == AuthorizationDecision(
        False,
        'RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, '
        'clusterrole.rbac.authorization.k8s.io "also-gone" not found, '
        'unsupported role reference kind: "Policy"]',
    )


def test_an_allow_wins_over_resolution_errors() -> None:
    authorizer = RBACAuthorizer(
        [
            cluster_role_binding("a", "gone", "User:alice"),
            cluster_role("reader", rule("get", "", "pods")),
            cluster_role_binding("b", "reader", "User:alice"),
        ]
    )
    decision = authorizer.authorize(resource_request(user("alice"), "get", "pods"))
    assert decision == AuthorizationDecision(
        True, 'RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "reader" to User "alice"'
    )


def test_update_replaces_every_object() -> None:
    objects = [
        cluster_role("reader", rule("get", "", "pods")),
        cluster_role_binding("b", "reader", "User:alice"),
    ]
    authorizer = RBACAuthorizer(objects)
    attrs = resource_request(user("alice"), "get", "pods")
    assert authorizer.authorize(attrs).allowed
    authorizer.update(objects[:1])
    assert not authorizer.authorize(attrs).allowed
    authorizer.update(objects[1:])
    assert authorizer.authorize(attrs) == AuthorizationDecision(
        False, 'RBAC: clusterrole.rbac.authorization.k8s.io "reader" not found'
    )


def test_update_rejects_objects_that_are_not_rbac() -> None:
    with pytest.raises(ValueError, match="not an RBAC object kind: 'Pod'"):
        RBACAuthorizer([{"kind": "Pod", "metadata": {"name": "p"}}])


# --- 403 texts ---

CTL = UserInfo.service_account("gd", "ctl")


@pytest.mark.parametrize(
    ("attrs", "reason", "message"),
    [
        (
            resource_request(
                CTL, "create", "pods", namespace="default", subresource="eviction", name="web-1"
            ),
            "",
            'pods "web-1" is forbidden: User "system:serviceaccount:gd:ctl" cannot create '
            'resource "pods/eviction" in API group "" in the namespace "default"',
        ),
        (
            resource_request(CTL, "list", "pods"),
            "",
            'pods is forbidden: User "system:serviceaccount:gd:ctl" cannot list resource "pods" '
            'in API group "" at the cluster scope',
        ),
        (
            resource_request(
                CTL, "list", "poddisruptionbudgets", api_group="policy", namespace="web"
            ),
            "",
            'poddisruptionbudgets.policy is forbidden: User "system:serviceaccount:gd:ctl" cannot '
            'list resource "poddisruptionbudgets" in API group "policy" in the namespace "web"',
        ),
        (
            resource_request(
                CTL, "patch", "deployments", api_group="apps", namespace="web", name="api"
            ),
            'RBAC: clusterrole.rbac.authorization.k8s.io "x" not found',
            'deployments.apps "api" is forbidden: User "system:serviceaccount:gd:ctl" cannot patch '
            'resource "deployments" in API group "apps" in the namespace "web": '
            'RBAC: clusterrole.rbac.authorization.k8s.io "x" not found',
        ),
        (
            resource_request(user("alice"), "get", "nodes", name="node-a"),
            "",
            'nodes "node-a" is forbidden: User "alice" cannot get resource "nodes" in API group "" '
            "at the cluster scope",
        ),
        (
            non_resource_request(user("system:anonymous"), "get", "/"),
            "",
            'forbidden: User "system:anonymous" cannot get path "/"',
        ),
        (
            non_resource_request(user("eve"), "get", "/<script>&"),
            "",
            'forbidden: User "eve" cannot get path "/&lt;script&gt;&amp;"',
        ),
    ],
)
def test_forbidden_messages_read_like_upstream(
    attrs: RequestAttributes, reason: str, message: str
) -> None:
    assert forbidden_message(attrs, reason) == message


def test_forbidden_status_is_a_full_403_status() -> None:
    attrs = resource_request(
        CTL, "create", "pods", namespace="default", subresource="eviction", name="web-1"
    )
    assert forbidden_status(attrs) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": forbidden_message(attrs),
        "reason": "Forbidden",
        "details": {"name": "web-1", "kind": "pods"},
        "code": 403,
    }
    assert forbidden_status(non_resource_request(CTL, "get", "/metrics"))["details"] == {}


# --- properties: the index against a plain port of upstream's walk ---

NAMESPACES = ["ns1", "ns2"]
USERS = ["alice", "system:serviceaccount:ns1:sa", "system:serviceaccount:ns2:sa"]
GROUPS = ["devs", "system:serviceaccounts"]

rules_strategy = st.builds(
    lambda verbs, groups, resources, names, urls: {
        "verbs": verbs,
        "apiGroups": groups,
        "resources": resources,
        "resourceNames": names,
        "nonResourceURLs": urls,
    },
    st.lists(st.sampled_from(["get", "list", "create", "*"]), min_size=1, max_size=2),
    st.lists(st.sampled_from(["", "apps", "*"]), min_size=1, max_size=2),
    st.lists(
        st.sampled_from(
            ["pods", "pods/eviction", "deployments", "deployments/scale", "*", "*/scale"]
        ),
        min_size=1,
        max_size=2,
    ),
    st.sampled_from([[], [], ["a"]]),
    st.lists(st.sampled_from(["/healthz", "/api/*", "*"]), max_size=1),
)
subject_strategy = st.one_of(
    st.builds(lambda name: {"kind": "User", "name": name}, st.sampled_from(USERS)),
    st.builds(lambda name: {"kind": "Group", "name": name}, st.sampled_from(GROUPS)),
    st.builds(
        lambda namespace: {"kind": "ServiceAccount", "name": "sa", "namespace": namespace},
        st.sampled_from(["", *NAMESPACES]),
    ),
)


@st.composite
def rbac_objects(draw: st.DrawFn) -> list[Obj]:
    objects: list[Obj] = []
    for name in draw(st.sets(st.sampled_from(["r1", "r2", "r3"]), min_size=1)):
        objects.append(cluster_role(name, *draw(st.lists(rules_strategy, min_size=1, max_size=3))))
    for namespace, name in draw(
        st.sets(st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(["r1", "r2"])))
    ):
        objects.append(
            role(namespace, name, *draw(st.lists(rules_strategy, min_size=1, max_size=3)))
        )
    for index in range(draw(st.integers(min_value=1, max_value=6))):
        namespace = draw(st.sampled_from(["", *NAMESPACES]))
        role_ref = {
            "kind": draw(
                st.sampled_from(["ClusterRole", "Role"] if namespace else ["ClusterRole"])
            ),
            "name": draw(st.sampled_from(["r1", "r2", "r3"])),
        }
        binding: Obj = {
            "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
            "metadata": {"name": f"b{index}", "namespace": namespace},
            "roleRef": role_ref,
            "subjects": draw(st.lists(subject_strategy, min_size=1, max_size=3)),
        }
        objects.append(binding)
    return objects


@st.composite
def requests(draw: st.DrawFn) -> RequestAttributes:
    # system:masters only now and then, so most examples exercise the bindings
    group_names = st.sampled_from([*GROUPS, *GROUPS, "system:masters"])
    requester = UserInfo(
        draw(st.sampled_from(USERS)), tuple(draw(st.lists(group_names, max_size=2)))
    )
    if draw(st.sampled_from([False, False, False, True])):
        return non_resource_request(
            requester,
            draw(st.sampled_from(["get", "post"])),
            draw(st.sampled_from(["/healthz", "/api/v1", "/metrics"])),
        )
    api_group, resource = draw(
        st.sampled_from([("", "pods"), ("", "pods"), ("apps", "deployments"), ("apps", "pods")])
    )
    return resource_request(
        requester,
        draw(st.sampled_from(["get", "list", "create"])),
        resource,
        namespace=draw(st.sampled_from(["", *NAMESPACES])),
        api_group=api_group,
        subresource=draw(st.sampled_from(["", "", "eviction", "scale"])),
        name=draw(st.sampled_from(["", "a", "b"])),
    )


def _applies(subject: Mapping[str, Any], requester: UserInfo, namespace: str) -> bool:
    # appliesToUser in pkg/registry/rbac/validation/rule.go
    if subject["kind"] == "User":
        return bool(requester.username == subject["name"])
    if subject["kind"] == "Group":
        return subject["name"] in requester.groups
    sa_namespace = subject.get("namespace") or namespace
    return (
        bool(sa_namespace)
        and requester.username == f"system:serviceaccount:{sa_namespace}:{subject['name']}"
    )


def reference_authorize(objects: Sequence[Obj], attrs: RequestAttributes) -> AuthorizationDecision:
    """A direct port of the privileged-group check and VisitRulesFor over raw dicts."""
    if "system:masters" in attrs.user.groups:
        return AuthorizationDecision(True, "")

    def meta(obj: Obj) -> tuple[str, str]:
        return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]

    cluster_roles = {meta(o)[1]: o for o in objects if o["kind"] == "ClusterRole"}
    roles = {meta(o): o for o in objects if o["kind"] == "Role"}
    walk = sorted((o for o in objects if o["kind"] == "ClusterRoleBinding"), key=meta)
    if attrs.namespace:
        walk += sorted(
            (o for o in objects if o["kind"] == "RoleBinding" and meta(o)[0] == attrs.namespace),
            key=meta,
        )
    errors: list[str] = []
    for binding in walk:
        namespace = meta(binding)[0] if binding["kind"] == "RoleBinding" else ""
        applying = [s for s in binding["subjects"] if _applies(s, attrs.user, namespace)]
        if not applying:
            continue
        ref = binding["roleRef"]
        found = (
            cluster_roles.get(ref["name"])
            if ref["kind"] == "ClusterRole"
            else roles.get((namespace, ref["name"]))
        )
        if found is None:
            errors.append(
                f'{ref["kind"].lower()}.rbac.authorization.k8s.io "{ref["name"]}" not found'
            )
            continue
        for policy_rule in found["rules"]:
            if rule_allows(attrs, policy_rule):
                subject = applying[0]
                who = f'{subject["kind"]} "{subject["name"]}"'
                if subject["kind"] == "ServiceAccount":
                    sa_namespace = subject.get("namespace") or namespace
                    who = f'ServiceAccount "{subject["name"]}/{sa_namespace}"'
                shown = f"{meta(binding)[1]}/{namespace}" if namespace else meta(binding)[1]
                return AuthorizationDecision(
                    True,
                    f'RBAC: allowed by {binding["kind"]} "{shown}" '
                    f'of {ref["kind"]} "{ref["name"]}" to {who}',
                )
    unique = list(dict.fromkeys(errors))
    if not unique:
        return AuthorizationDecision(False, "")
    return AuthorizationDecision(
        False, "RBAC: " + (unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]")
    )


@settings(max_examples=300)
@given(rbac_objects(), st.lists(requests(), min_size=1, max_size=5))
def test_indexed_authorizer_agrees_with_a_plain_walk(
    objects: list[Obj], attrs_list: list[RequestAttributes]
) -> None:
    authorizer = RBACAuthorizer(objects)
    for attrs in attrs_list:
        assert authorizer.authorize(attrs) == reference_authorize(objects, attrs)


def _granting_bindings(objects: Sequence[Obj], attrs: RequestAttributes) -> list[Obj]:
    """Bindings in scope whose subject is the requester and whose role has an allowing rule."""
    rules_by_ref = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["rules"]
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    granting = []
    for binding in objects:
        if not binding["kind"].endswith("Binding"):
            continue
        namespace = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role_namespace = "" if ref["kind"] == "ClusterRole" else namespace
        rules = rules_by_ref.get((ref["kind"], role_namespace, ref["name"]), [])
        if (
            namespace in ("", attrs.namespace)
            and any(_applies(s, attrs.user, namespace) for s in binding["subjects"])
            and any(rule_allows(attrs, policy_rule) for policy_rule in rules)
        ):
            granting.append(binding)
    return granting


@given(rbac_objects(), st.lists(requests(), min_size=1, max_size=8))
def test_no_allow_without_a_binding_that_grants_it(
    objects: list[Obj], attrs_list: list[RequestAttributes]
) -> None:
    authorizer = RBACAuthorizer(objects)
    for attrs in attrs_list:
        allowed = authorizer.authorize(attrs).allowed
        if "system:masters" in attrs.user.groups:
            assert allowed
        else:
            # an allow exactly when some binding grants it
            assert allowed == bool(_granting_bindings(objects, attrs)), attrs


@given(rbac_objects(), rbac_objects(), st.lists(requests(), min_size=1, max_size=8))
def test_more_bindings_never_take_an_allow_away(
    objects: list[Obj], extra: list[Obj], attrs_list: list[RequestAttributes]
) -> None:
    renamed = [
        {**obj, "metadata": {**obj["metadata"], "name": "extra-" + obj["metadata"]["name"]}}
        for obj in extra
        if obj["kind"].endswith("Binding")
    ]
    before, after = RBACAuthorizer(objects), RBACAuthorizer(objects + renamed)
    for attrs in attrs_list:
        assert after.authorize(attrs).allowed >= before.authorize(attrs).allowed


# --- RulesFor (SelfSubjectRulesReview) ---

RULES_OBJECTS = [
    cluster_role("reader", rule("get,list", "", "pods"), rule("get", urls="/healthz")),
    cluster_role("both", rule("get", "apps", "deployments", urls="/version")),
    role("ns", "one", rule("get", "", "configmaps", names="settings")),
    cluster_role_binding("readers", "reader", "Group:readers"),
    role_binding("ns", "one", "Role", "one", "User:alice"),
    role_binding("ns", "both", "ClusterRole", "both", "User:alice"),
    role_binding("ns", "dangling", "Role", "missing", "User:alice"),
    role_binding("other", "one", "Role", "one", "User:alice"),
]


@pytest.mark.parametrize(
    ("who", "namespace", "resource_rules", "non_resource_rules", "error"),
    [
        (user("bob"), "ns", [], [], None),
        (user("bob", "readers"), "ns",
         [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}],
         [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}], None),
        # A rule with both resources and URLs counts once in each list; the RoleBindings are
        # visited by name; a dangling roleRef is an evaluation error, not a failure.
        (user("alice"), "ns",
         [{"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"]},
          {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
           "resourceNames": ["settings"]}],
         [{"verbs": ["get"], "nonResourceURLs": ["/version"]}],
         'role.rbac.authorization.k8s.io "missing" not found'),
        (user("alice"), "elsewhere", [], [], None),
        # system:masters gets only what RBAC binds to it (here nothing).
        (user("root", "system:masters"), "ns", [], [], None),
    ],
)  # fmt: skip
def test_rules_for_like_upstream(
    who: UserInfo, namespace: str, resource_rules: list[Obj], non_resource_rules: list[Obj],
    error: str | None,
) -> None:  # fmt: skip
    status = RBACAuthorizer(RULES_OBJECTS).rules_for(who, namespace).status()
    assert status["resourceRules"] == resource_rules
    assert status["nonResourceRules"] == non_resource_rules
    assert status.get("evaluationError") == error
    assert status["incomplete"] is False
