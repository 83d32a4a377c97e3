"""Which webhooks a request calls: rules, scope, selectors, matchPolicy.

Tables follow staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/
rules/rules_test.go, namespace/matcher_test.go, object/matcher_test.go and
generic/webhook_test.go (TestShouldCallHook).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.admission.rules import (
    AdmissionRequestAttributes,
    Equivalent,
    GroupVersionKind,
    GroupVersionResource,
    Invocation,
    is_exempt,
    namespace_selector_matches,
    object_selector_matches,
    rule_matches,
    should_call,
)
from kubesim.apiserver.admission.webhooks import kind_for, request_attributes
from kubesim.apiserver.auth import UserInfo
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.resources import ResourceRegistry
from kubesim.apiserver.selectors import label_selector_from_object
from kubesim.apiserver.server import AdmissionAttributes

PODS = GroupVersionResource("", "v1", "pods")
DEPLOYMENTS = GroupVersionResource("apps", "v1", "deployments")
NODES = GroupVersionResource("", "v1", "nodes")
NAMESPACES = GroupVersionResource("", "v1", "namespaces")
CORE_EVENTS = GroupVersionResource("", "v1", "events")
EVENTS_V1 = GroupVersionResource("events.k8s.io", "v1", "events")
POD_KIND = GroupVersionKind("", "v1", "Pod")
EVICTION_KIND = GroupVersionKind("policy", "v1", "Eviction")


def rule(
    resources: list[str],
    operations: tuple[str, ...] = ("*",),
    groups: tuple[str, ...] = ("*",),
    versions: tuple[str, ...] = ("*",),
    scope: str | None = "*",
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operations": list(operations),
        "apiGroups": list(groups),
        "apiVersions": list(versions),
        "resources": resources,
    }
    if scope is not None:
        out["scope"] = scope
    return out


EVICTION_RULE = rule(["pods/eviction"], ("CREATE",), ("",), ("v1",))


@pytest.mark.parametrize(
    ("case", "the_rule", "resource", "subresource", "operation", "namespace", "expected"),
    [
        ("eviction rule, eviction", EVICTION_RULE, PODS, "eviction", "CREATE", "ns", True),
        ("eviction rule, pod create", EVICTION_RULE, PODS, "", "CREATE", "ns", False),
        ("eviction rule, pods/status", EVICTION_RULE, PODS, "status", "CREATE", "ns", False),
        ("eviction rule, other op", EVICTION_RULE, PODS, "eviction", "DELETE", "ns", False),
        ("pods never matches a subresource", rule(["pods"]), PODS, "eviction", "CREATE", "ns",
         False),
        ("pods/* matches the subresource", rule(["pods/*"]), PODS, "eviction", "CREATE", "ns",
         True),
        ("pods/* matches pods itself too", rule(["pods/*"]), PODS, "", "CREATE", "ns", True),
        ("* is main resources only", rule(["*"]), PODS, "status", "UPDATE", "ns", False),
        ("* matches a main resource", rule(["*"]), DEPLOYMENTS, "", "UPDATE", "ns", True),
        ("*/* matches subresources", rule(["*/*"]), PODS, "eviction", "CREATE", "ns", True),
        ("*/status, status", rule(["*/status"]), DEPLOYMENTS, "status", "UPDATE", "ns", True),
        ("*/status, main", rule(["*/status"]), DEPLOYMENTS, "", "UPDATE", "ns", False),
        ("*/status, scale", rule(["*/status"]), DEPLOYMENTS, "scale", "UPDATE", "ns", False),
        ("group mismatch", rule(["*"], groups=("apps",)), PODS, "", "CREATE", "ns", False),
        ("version mismatch", rule(["*"], versions=("v2",)), PODS, "", "CREATE", "ns", False),
        ("operation list", rule(["*"], ("UPDATE", "CREATE")), PODS, "", "CREATE", "ns", True),
        ("no operations", rule(["*"], ()), PODS, "", "CREATE", "ns", False),
        ("CONNECT", rule(["pods/exec"], ("CONNECT",)), PODS, "exec", "CONNECT", "ns", True),
        ("Namespaced, namespaced", rule(["*"], scope="Namespaced"), PODS, "", "CREATE", "ns",
         True),
        ("Namespaced, cluster", rule(["*"], scope="Namespaced"), NODES, "", "CREATE", "", False),
        ("Namespaced, namespace obj", rule(["*"], scope="Namespaced"), NAMESPACES, "",
         "UPDATE", "team-a", False),
        ("Cluster, cluster", rule(["*"], scope="Cluster"), NODES, "", "CREATE", "", True),
        ("Cluster, namespace obj", rule(["*"], scope="Cluster"), NAMESPACES, "", "UPDATE",
         "team-a", True),
        ("Cluster, namespaced", rule(["*"], scope="Cluster"), PODS, "", "CREATE", "ns", False),
        ("absent scope is *", rule(["*"], scope=None), NODES, "", "CREATE", "", True),
        ("unknown scope", rule(["*"], scope="Galaxy"), PODS, "", "CREATE", "ns", False),
    ],
)  # fmt: skip
def test_rule_matches(
    case: str,
    the_rule: dict[str, Any],
    resource: GroupVersionResource,
    subresource: str,
    operation: str,
    namespace: str,
    expected: bool,
) -> None:
    assert rule_matches(the_rule, resource, subresource, operation, namespace) is expected, case


def eviction_request(namespace: str = "team-a", **changes: Any) -> AdmissionRequestAttributes:
    base: dict[str, Any] = {
        "resource": PODS,
        "subresource": "eviction",
        "kind": EVICTION_KIND,
        "operation": "CREATE",
        "namespace": namespace,
        "name": "web-1",
        "object": {"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": "web-1", "namespace": namespace}},
        "old_object": None,
    }  # fmt: skip
    base.update(changes)
    return AdmissionRequestAttributes(**base)


def webhook(**fields: Any) -> dict[str, Any]:
    return {"name": "gd.example.com", "rules": [EVICTION_RULE], "namespaceSelector": {},
            "objectSelector": {}, "matchPolicy": "Equivalent", **fields}  # fmt: skip


NAMESPACE_LABELS: dict[str, dict[str, str]] = {
    "team-a": {"team": "a", "drain": "graceful"},
    "kube-system": {"kubernetes.io/metadata.name": "kube-system"},
}


def labels_of(namespace: str) -> Mapping[str, str] | None:
    return NAMESPACE_LABELS.get(namespace)


OPT_OUT = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                 "values": ["kube-system"]}]}  # fmt: skip


@pytest.mark.parametrize(
    ("case", "selector", "request_attrs", "expected"),
    [
        ("empty selector", {}, eviction_request(), True),
        ("absent (null) selector is defaulted to {}", None, eviction_request(), True),
        ("labels match", {"matchLabels": {"team": "a"}}, eviction_request(), True),
        ("labels differ", {"matchLabels": {"team": "b"}}, eviction_request(), False),
        ("NotIn opt-out, other ns", OPT_OUT, eviction_request(), True),
        ("NotIn opt-out, excluded ns", OPT_OUT, eviction_request("kube-system"), False),
        ("Exists", {"matchExpressions": [{"key": "drain", "operator": "Exists"}]},
         eviction_request(), True),
        ("cluster-scoped requests are never exempted", {"matchLabels": {"team": "b"}},
         eviction_request("", resource=NODES, subresource="", operation="UPDATE"), True),
        ("a namespace being created: its own labels",
         {"matchLabels": {"team": "c"}},
         eviction_request("", resource=NAMESPACES, subresource="", name="team-c",
                          object={"metadata": {"name": "team-c", "labels": {"team": "c"}}}),
         True),
        ("a namespace being deleted: its stored labels", {"matchLabels": {"team": "a"}},
         eviction_request("team-a", resource=NAMESPACES, subresource="", operation="DELETE",
                          name="team-a", object=None), True),
    ],
)  # fmt: skip
def test_namespace_selector(
    case: str, selector: Any, request_attrs: AdmissionRequestAttributes, expected: bool
) -> None:
    hook = webhook(namespaceSelector=selector)
    matches, error = namespace_selector_matches(hook, request_attrs, labels_of)
    assert error is None, case
    assert matches is expected, case


def test_namespace_not_found_is_404_only_when_a_rule_matches() -> None:
    selector = {"matchLabels": {"team": "a"}}
    request_attrs = eviction_request("gone")
    with pytest.raises(ApiError) as err:
        should_call(webhook(namespaceSelector=selector), request_attrs, [], labels_of)
    assert (err.value.code, err.value.message) == (404, 'namespaces "gone" not found')
    unrelated = webhook(namespaceSelector=selector, rules=[rule(["deployments"])])
    assert should_call(unrelated, request_attrs, [], labels_of) is None


def test_invalid_selector_is_internal_error_when_a_rule_matches() -> None:
    bad = {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}
    with pytest.raises(ApiError) as err:
        should_call(webhook(objectSelector=bad), eviction_request(), [], labels_of)
    assert err.value.code == 500
    assert err.value.message.startswith("Internal error occurred: ")


POD_LABELS = {"app": "web"}


@pytest.mark.parametrize(
    ("case", "selector", "new", "old", "expected"),
    [
        ("empty", {}, None, None, True),
        ("new object labels", {"matchLabels": POD_LABELS}, {"metadata": {"labels": POD_LABELS}},
         None, True),
        ("old object labels (DELETE)", {"matchLabels": POD_LABELS}, None,
         {"metadata": {"labels": POD_LABELS}}, True),
        ("labels removed by an update still match by the old object",
         {"matchLabels": POD_LABELS}, {"metadata": {}}, {"metadata": {"labels": POD_LABELS}},
         True),
        ("neither", {"matchLabels": POD_LABELS}, {"metadata": {"labels": {"app": "db"}}},
         None, False),
        # The Eviction is the object: a pod-label selector does not select evictions.
        ("eviction has no pod labels", {"matchLabels": POD_LABELS},
         {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1"}}, None,
         False),
        ("DoesNotExist on an unlabeled object",
         {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
         {"metadata": {}}, None, True),
    ],
)  # fmt: skip
def test_object_selector(case: str, selector: Any, new: Any, old: Any, expected: bool) -> None:
    attrs = eviction_request(object=new, old_object=old)
    matches, error = object_selector_matches(webhook(objectSelector=selector), attrs)
    assert error is None, case
    assert matches is expected, case


EVENTS_RULE = rule(["events"], ("CREATE",), ("events.k8s.io",), ("v1",))
EVENT_EQUIVALENTS: list[Equivalent] = [
    (CORE_EVENTS, GroupVersionKind("", "v1", "Event")),
    (EVENTS_V1, GroupVersionKind("events.k8s.io", "v1", "Event")),
]


def core_event_request() -> AdmissionRequestAttributes:
    return AdmissionRequestAttributes(
        CORE_EVENTS, "", GroupVersionKind("", "v1", "Event"), "CREATE",
        "team-a", "e1", {"metadata": {"name": "e1"}}, None,
    )  # fmt: skip


def test_equivalent_policy_calls_through_an_equivalent_resource() -> None:
    hook = webhook(rules=[EVENTS_RULE], matchPolicy="Equivalent")
    invocation = should_call(hook, core_event_request(), EVENT_EQUIVALENTS, labels_of)
    assert invocation == Invocation(hook, EVENTS_V1, "", GroupVersionKind("events.k8s.io", "v1",
                                                                          "Event"))  # fmt: skip


def test_exact_policy_does_not() -> None:
    hook = webhook(rules=[EVENTS_RULE], matchPolicy="Exact")
    assert should_call(hook, core_event_request(), EVENT_EQUIVALENTS, labels_of) is None


def test_direct_match_keeps_the_request_resource_and_kind() -> None:
    hook = webhook()
    invocation = should_call(hook, eviction_request(), [(PODS, EVICTION_KIND)], labels_of)
    assert invocation is not None
    assert (invocation.resource, invocation.subresource, invocation.kind) == (
        PODS,
        "eviction",
        EVICTION_KIND,
    )


@pytest.mark.parametrize(
    ("kind", "exempt"),
    [
        (GroupVersionKind("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
         True),
        (GroupVersionKind("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"),
         True),
        (GroupVersionKind("admissionregistration.k8s.io", "v1", "Other"), False),
        (POD_KIND, False),
    ],
)  # fmt: skip
def test_admission_configuration_is_exempt(kind: GroupVersionKind, exempt: bool) -> None:
    assert is_exempt(kind) is exempt


RESOURCES = ResourceRegistry()


@pytest.mark.parametrize(
    ("group", "kind", "subresource", "expected"),
    [
        ("", "Pod", "eviction", GroupVersionKind("policy", "v1", "Eviction")),
        ("", "Pod", "status", GroupVersionKind("", "v1", "Pod")),
        ("", "Pod", "binding", GroupVersionKind("", "v1", "Binding")),
        ("apps", "Deployment", "scale", GroupVersionKind("autoscaling", "v1", "Scale")),
        ("", "Namespace", "finalize", GroupVersionKind("", "v1", "Namespace")),
        ("", "Pod", "nonsense", None),
    ],
)
def test_kind_for(
    group: str, kind: str, subresource: str, expected: GroupVersionKind | None
) -> None:
    rt = RESOURCES.by_kind(group, kind)
    assert rt is not None
    assert kind_for(rt, subresource) == expected


def _attrs(stored_kind: str, operation: str, namespace: str, name: str, **extra: Any) -> Any:
    rt = RESOURCES.by_kind("", stored_kind)
    assert rt is not None
    return AdmissionAttributes(rt, extra.pop("subresource", ""), operation, namespace, name,
                               None, None, None, False, UserInfo("u"), **extra)  # fmt: skip


@pytest.mark.parametrize(
    ("attrs", "namespace", "kind"),
    [
        (_attrs("Namespace", "DELETE", "", "team-a"), "team-a", GroupVersionKind("", "v1",
                                                                                "Namespace")),
        (_attrs("Namespace", "CREATE", "", "team-a"), "", GroupVersionKind("", "v1",
                                                                          "Namespace")),
        (_attrs("Pod", "CREATE", "ns", "p", subresource="eviction", kind_group="policy",
                kind_version="v1", kind="Eviction"), "ns", EVICTION_KIND),
        (_attrs("Pod", "UPDATE", "ns", "p", subresource="status"), "ns", POD_KIND),
    ],
)  # fmt: skip
def test_request_attributes(attrs: Any, namespace: str, kind: GroupVersionKind) -> None:
    request = request_attributes(attrs)
    assert (request.namespace, request.kind) == (namespace, kind)


# properties

OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
names = st.sampled_from(["", "apps", "policy", "pods", "deployments", "status", "eviction"])
resources = st.builds(GroupVersionResource, names, st.sampled_from(["v1", "v1beta1"]),
                      st.sampled_from(["pods", "deployments", "nodes", "namespaces"]))  # fmt: skip
label_maps = st.dictionaries(st.sampled_from(["a", "b", "c", "app"]),
                             st.sampled_from(["x", "y", "z"]), max_size=4)  # fmt: skip


@given(resources, names, st.sampled_from(OPERATIONS), st.sampled_from(["", "ns"]))
def test_match_all_rule_matches_everything(
    resource: GroupVersionResource, subresource: str, operation: str, namespace: str
) -> None:
    assert rule_matches(rule(["*/*"]), resource, subresource, operation, namespace)


@given(resources, names, st.sampled_from(OPERATIONS), st.lists(st.sampled_from(OPERATIONS)))
def test_unlisted_operation_never_matches(
    resource: GroupVersionResource, subresource: str, operation: str, listed: list[str]
) -> None:
    the_rule = rule(["*/*"], tuple(listed))
    assert rule_matches(the_rule, resource, subresource, operation, "ns") is (operation in listed)


@given(st.sampled_from(["Exact", "Equivalent"]), st.sampled_from(["events", "pods", "*"]))
def test_equivalent_calls_whenever_exact_does(policy: str, resource_pattern: str) -> None:
    rules = [rule([resource_pattern], ("CREATE",), ("",), ("v1",))]
    exact = should_call(webhook(rules=rules, matchPolicy="Exact"), core_event_request(),
                        EVENT_EQUIVALENTS, labels_of)  # fmt: skip
    chosen = should_call(webhook(rules=rules, matchPolicy=policy), core_event_request(),
                         EVENT_EQUIVALENTS, labels_of)  # fmt: skip
    if exact is not None:
        assert chosen is not None and chosen.resource == exact.resource


@given(label_maps, label_maps)
def test_match_labels_selects_supersets(required: dict[str, str], extra: dict[str, str]) -> None:
    selector = label_selector_from_object({"matchLabels": required})
    assert selector.matches({**extra, **required})


@given(label_maps)
def test_empty_selector_matches_all_and_null_nothing(labels: dict[str, str]) -> None:
    assert label_selector_from_object({}).matches(labels)
    assert not label_selector_from_object(None).matches(labels)


@given(label_maps, st.sampled_from(["a", "b"]), st.lists(st.sampled_from(["x", "y"]), min_size=1))
def test_in_and_notin_are_complements(labels: dict[str, str], key: str, values: list[str]) -> None:
    def expr(op: str) -> dict[str, Any]:
        return {"matchExpressions": [{"key": key, "operator": op, "values": values}]}

    in_ = label_selector_from_object(expr("In")).matches(labels)
    not_in = label_selector_from_object(expr("NotIn")).matches(labels)
    assert in_ is not not_in
