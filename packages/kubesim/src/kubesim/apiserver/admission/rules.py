"""Which validating webhooks a request calls: upstream's webhook predicates, as pure functions.

After staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/:
predicates/rules/rules.go (operations, apiGroups, apiVersions, resources, scope),
predicates/namespace/matcher.go (namespaceSelector), predicates/object/matcher.go
(objectSelector) and generic/webhook.go `ShouldCallHook` (matchPolicy Equivalent).
The caller supplies namespace labels and the equivalent resources, so nothing here
does I/O. matchConditions (CEL) are not evaluated: kubesim ignores them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesim.apiserver.errors import ApiError, not_found
from kubesim.apiserver.selectors import SelectorError, label_selector_from_object
from kubesim.types import Obj

NamespaceLabels = Callable[[str], Mapping[str, str] | None]  # None: no such namespace


@dataclass(frozen=True, slots=True)
class GroupVersionResource:
    group: str
    version: str
    resource: str

    def to_json(self) -> Obj:
        return {"group": self.group, "version": self.version, "resource": self.resource}


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def to_json(self) -> Obj:
        return {"group": self.group, "version": self.version, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class AdmissionRequestAttributes:
    """admission.Attributes: what one write asks of the webhooks."""

    resource: GroupVersionResource
    subresource: str
    kind: GroupVersionKind
    operation: str  # CREATE UPDATE DELETE CONNECT
    namespace: str  # for a Namespace object itself: its name (except on CREATE)
    name: str
    object: Obj | None
    old_object: Obj | None


@dataclass(frozen=True, slots=True)
class Invocation:
    """generic.WebhookInvocation: the webhook and the resource/kind it is called with."""

    webhook: Obj
    resource: GroupVersionResource
    subresource: str
    kind: GroupVersionKind

    @property
    def name(self) -> str:
        return str(self.webhook.get("name", ""))


# A resource that shares storage with the requested one, and the kind it serves for the
# request's subresource (EquivalentResourceMapper.EquivalentResourcesFor / KindFor).
Equivalent = tuple[GroupVersionResource, GroupVersionKind]

NAMESPACES = GroupVersionResource("", "v1", "namespaces")

_EXEMPT_KINDS = (
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
)


def is_exempt(kind: GroupVersionKind) -> bool:
    """rules.IsExemptAdmissionConfigurationResource: webhooks never see their own config."""
    return kind.group == "admissionregistration.k8s.io" and kind.kind in _EXEMPT_KINDS


def _exact_or_wildcard(items: Sequence[str], requested: str) -> bool:
    return any(item in ("*", requested) for item in items)


def _scope_matches(scope: str | None, resource: GroupVersionResource, namespace: str) -> bool:
    if scope is None or scope == "*":
        return True
    if scope == "Namespaced":
        return resource != NAMESPACES and namespace != ""
    if scope == "Cluster":
        return resource == NAMESPACES or namespace == ""
    return False


def _resource_matches(
    patterns: Sequence[str], resource: GroupVersionResource, subresource: str
) -> bool:
    for pattern in patterns:
        res, _, sub = pattern.partition("/")
        if res in ("*", resource.resource) and sub in ("*", subresource):
            return True
    return False


def rule_matches(
    rule: Mapping[str, Any],
    resource: GroupVersionResource,
    subresource: str,
    operation: str,
    namespace: str,
) -> bool:
    """rules.Matcher.Matches for one RuleWithOperations."""
    operations = rule.get("operations") or []
    return (
        _scope_matches(rule.get("scope"), resource, namespace)
        and any(op in ("*", operation) for op in operations)
        and _exact_or_wildcard(rule.get("apiGroups") or [], resource.group)
        and _exact_or_wildcard(rule.get("apiVersions") or [], resource.version)
        and _resource_matches(rule.get("resources") or [], resource, subresource)
    )


def _internal_error(err: Exception) -> ApiError:
    message = str(err)
    return ApiError(500, f"Internal error occurred: {message}", "InternalError",
                    {"causes": [{"message": message}]})  # fmt: skip


def _selector(webhook: Mapping[str, Any], field: str) -> Any:
    # The API server defaults both selectors to {} (match everything).
    value = webhook.get(field, {})
    return {} if value is None else value


def namespace_selector_matches(
    webhook: Mapping[str, Any], attrs: AdmissionRequestAttributes, namespace_labels: NamespaceLabels
) -> tuple[bool, ApiError | None]:
    """namespace.Matcher.MatchNamespaceSelector."""
    if not attrs.namespace and attrs.resource.resource != "namespaces":
        # A cluster-scoped request that is not about a namespace is never exempted.
        return True, None
    try:
        selector = label_selector_from_object(_selector(webhook, "namespaceSelector"))
    except SelectorError as err:
        return False, _internal_error(err)
    if selector.empty:
        return True, None
    if (
        attrs.resource.resource == "namespaces"
        and not attrs.subresource
        and attrs.operation in ("CREATE", "UPDATE")
    ):
        # The namespace being written: its new labels, not the stored ones.
        labels = ((attrs.object or {}).get("metadata") or {}).get("labels") or {}
    else:
        found = namespace_labels(attrs.namespace)
        if found is None:
            return False, not_found("", "namespaces", attrs.namespace)
        labels = found
    return selector.matches(labels), None


def object_selector_matches(
    webhook: Mapping[str, Any], attrs: AdmissionRequestAttributes
) -> tuple[bool, ApiError | None]:
    """object.Matcher.MatchObjectSelector: the new or the old object's labels."""
    try:
        selector = label_selector_from_object(_selector(webhook, "objectSelector"))
    except SelectorError as err:
        return False, _internal_error(err)
    if selector.empty:
        return True, None

    def matches(obj: Obj | None) -> bool:
        if obj is None:
            return False
        return selector.matches((obj.get("metadata") or {}).get("labels") or {})

    return matches(attrs.object) or matches(attrs.old_object), None


def should_call(
    webhook: Obj,
    attrs: AdmissionRequestAttributes,
    equivalents: Sequence[Equivalent],
    namespace_labels: NamespaceLabels,
) -> Invocation | None:
    """generic.Webhook.ShouldCallHook. Raises ApiError for a selector or namespace error,
    but only when a rule matched (upstream does not fail requests a webhook ignores).

    The rules are matched first, upstream's selectors after: the answer is the same (a
    request no rule matches is never called nor failed, whatever the selectors say), and
    most writes match no rule of most webhooks."""
    rules = webhook.get("rules") or []
    invocation: Invocation | None = None
    for rule in rules:
        if rule_matches(rule, attrs.resource, attrs.subresource, attrs.operation,
                        attrs.namespace):  # fmt: skip
            invocation = Invocation(webhook, attrs.resource, attrs.subresource, attrs.kind)
            break
    if invocation is None and webhook.get("matchPolicy", "Equivalent") == "Equivalent":
        invocation = _equivalent_invocation(webhook, rules, attrs, equivalents)
    if invocation is None:
        return None
    ns_matches, ns_error = namespace_selector_matches(webhook, attrs, namespace_labels)
    if not ns_matches and ns_error is None:
        return None
    obj_matches, obj_error = object_selector_matches(webhook, attrs)
    if not obj_matches and obj_error is None:
        return None
    if ns_error is not None:
        raise ns_error
    if obj_error is not None:
        raise obj_error
    return invocation


def _equivalent_invocation(
    webhook: Obj,
    rules: Sequence[Mapping[str, Any]],
    attrs: AdmissionRequestAttributes,
    equivalents: Sequence[Equivalent],
) -> Invocation | None:
    # Earlier rules win; within a rule, equivalents in the mapper's order.
    for rule in rules:
        for resource, kind in equivalents:
            if resource == attrs.resource:
                continue
            if rule_matches(rule, resource, attrs.subresource, attrs.operation, attrs.namespace):
                return Invocation(webhook, resource, attrs.subresource, kind)
    return None
