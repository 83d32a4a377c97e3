"""An RBAC authorizer and the 403 Forbidden texts of kube-apiserver.

Ports plugin/pkg/auth/authorizer/rbac/rbac.go (``RBACAuthorizer``,
``RuleAllows``), pkg/apis/rbac/v1/evaluation_helpers.go (rule matching),
pkg/registry/rbac/validation/rule.go (which bindings apply to a user, in
which order, and the "allowed by" descriptions), the ``system:masters``
privileged-group authorizer, and
staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go
(``Forbidden``/``forbiddenMessage``).

Roles and bindings are plain API dicts. :class:`RBACAuthorizer` compiles them
once per :meth:`RBACAuthorizer.update` into an index by subject, so a request
only looks at the bindings naming its user or one of its groups.

Upstream walks its informer caches in no defined order; here bindings are
visited ClusterRoleBindings first, then the namespace's RoleBindings (as
upstream), each sorted by name, which fixes the "allowed by" text and the
order of errors in a denial reason.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesim.apiserver.auth import UserInfo
from kubesim.apiserver.gofmt import go_aggregate, go_quote

SERVICE_ACCOUNT_USERNAME_PREFIX = "system:serviceaccount:"
ALL_SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
SERVICE_ACCOUNT_GROUP_PREFIX = "system:serviceaccounts:"
AUTHENTICATED_GROUP = "system:authenticated"
PRIVILEGED_GROUP = "system:masters"
RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class RequestAttributes:
    """authorizer.Attributes: who asks to do what. Build with :func:`resource_request`
    or :func:`non_resource_request`.

    For a resource request ``name`` is empty for create (POST to a collection),
    list, watch and deletecollection, so rules with ``resourceNames`` never
    allow those; a subresource POST such as ``pods/eviction`` names its pod.
    """

    user: UserInfo
    verb: str
    is_resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


def resource_request(
    user: UserInfo,
    verb: str,
    resource: str,
    *,
    namespace: str = "",
    api_group: str = "",
    api_version: str = "",
    subresource: str = "",
    name: str = "",
    path: str = "",
) -> RequestAttributes:
    """Attributes of an API resource request; ``namespace=""`` for cluster scope."""
    return RequestAttributes(
        user=user,
        verb=verb,
        is_resource_request=True,
        namespace=namespace,
        api_group=api_group,
        api_version=api_version,
        resource=resource,
        subresource=subresource,
        name=name,
        path=path,
    )


def non_resource_request(user: UserInfo, verb: str, path: str) -> RequestAttributes:
    """Attributes of a non-resource request (``/healthz``, ``/api``, ``/metrics`` ...)."""
    return RequestAttributes(user=user, verb=verb, is_resource_request=False, path=path)


@dataclass(frozen=True)
class AuthorizationDecision:
    """The authorizer's answer. ``reason`` is upstream's (often empty) reason text."""

    allowed: bool
    reason: str = ""


# --- rule matching (pkg/apis/rbac/v1/evaluation_helpers.go) ---


def _strings(rule: Mapping[str, Any], field_name: str) -> tuple[str, ...]:
    return tuple(str(item) for item in rule.get(field_name) or ())


@dataclass(frozen=True)
class CompiledRule:
    """A PolicyRule turned into sets; :meth:`allows` is ``RuleAllows``."""

    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    star_subresources: frozenset[str]
    resource_names: frozenset[str]
    non_resource_urls: frozenset[str]
    non_resource_prefixes: tuple[str, ...]

    @classmethod
    def from_rule(cls, rule: Mapping[str, Any]) -> "CompiledRule":
        resources = _strings(rule, "resources")
        urls = _strings(rule, "nonResourceURLs")
        return cls(
            verbs=frozenset(_strings(rule, "verbs")),
            api_groups=frozenset(_strings(rule, "apiGroups")),
            resources=frozenset(resources),
            star_subresources=frozenset(
                resource[2:] for resource in resources if resource.startswith("*/")
            ),
            resource_names=frozenset(_strings(rule, "resourceNames")),
            non_resource_urls=frozenset(urls),
            # "/apis/*" covers every path under "/apis/" (strings.TrimRight of "*").
            non_resource_prefixes=tuple(url.rstrip("*") for url in urls if url.endswith("*")),
        )

    def allows(self, attrs: RequestAttributes) -> bool:
        if "*" not in self.verbs and attrs.verb not in self.verbs:
            return False
        if not attrs.is_resource_request:
            return self._url_matches(attrs.path)
        return (
            ("*" in self.api_groups or attrs.api_group in self.api_groups)
            and self._resource_matches(attrs.resource, attrs.subresource)
            and (not self.resource_names or attrs.name in self.resource_names)
        )

    def _resource_matches(self, resource: str, subresource: str) -> bool:
        if "*" in self.resources:
            return True
        combined = f"{resource}/{subresource}" if subresource else resource
        if combined in self.resources:
            return True
        # A "*/scale" rule matches the scale subresource of every resource.
        return bool(subresource) and subresource in self.star_subresources

    def _url_matches(self, path: str) -> bool:
        if "*" in self.non_resource_urls or path in self.non_resource_urls:
            return True
        return any(path.startswith(prefix) for prefix in self.non_resource_prefixes)


def rule_allows(attrs: RequestAttributes, rule: Mapping[str, Any]) -> bool:
    """``RuleAllows`` for one PolicyRule dict (verbs, apiGroups, resources, ...)."""
    return CompiledRule.from_rule(rule).allows(attrs)


# --- bindings and their subjects (pkg/registry/rbac/validation/rule.go) ---


@dataclass(frozen=True)
class _Subject:
    kind: str
    name: str
    namespace: str

    def applies_to(self, user: UserInfo, binding_namespace: str) -> bool:
        if self.kind == "User":
            return user.username == self.name
        if self.kind == "Group":
            return self.name in user.groups
        if self.kind == "ServiceAccount":
            namespace = self.namespace or binding_namespace
            return bool(namespace) and user.username == _service_account_username(
                namespace, self.name
            )
        return False

    def describe(self, binding_namespace: str) -> str:
        if self.kind == "ServiceAccount":
            namespace = self.namespace or binding_namespace
            return f"{self.kind} {go_quote(self.name + '/' + namespace)}"
        return f"{self.kind} {go_quote(self.name)}"


def _service_account_username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_USERNAME_PREFIX}{namespace}:{name}"


@dataclass(frozen=True)
class _Binding:
    """A (Cluster)RoleBinding with its role already resolved to rules, or to an error."""

    order: int
    kind: str
    name: str
    namespace: str
    role_kind: str
    role_name: str
    subjects: tuple[_Subject, ...]
    rules: tuple[CompiledRule, ...]
    error: str
    # The role's PolicyRules as written, for SelfSubjectRulesReview.
    policy_rules: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)

    def first_applicable_subject(self, user: UserInfo) -> _Subject | None:
        for subject in self.subjects:
            if subject.applies_to(user, self.namespace):
                return subject
        return None

    def describe(self, subject: _Subject) -> str:
        shown = f"{self.name}/{self.namespace}" if self.namespace else self.name
        return (
            f"{self.kind} {go_quote(shown)} of {self.role_kind} {go_quote(self.role_name)}"
            f" to {subject.describe(self.namespace)}"
        )


@dataclass
class _BindingIndex:
    """Bindings of one scope, reachable by user name (service accounts included) or group."""

    by_user: dict[str, list[_Binding]]
    by_group: dict[str, list[_Binding]]

    def add(self, binding: _Binding) -> None:
        for subject in binding.subjects:
            if subject.kind == "User":
                self.by_user.setdefault(subject.name, []).append(binding)
            elif subject.kind == "Group":
                self.by_group.setdefault(subject.name, []).append(binding)
            elif subject.kind == "ServiceAccount":
                namespace = subject.namespace or binding.namespace
                if namespace:
                    username = _service_account_username(namespace, subject.name)
                    self.by_user.setdefault(username, []).append(binding)

    def candidates(self, user: UserInfo) -> list[_Binding]:
        """Bindings that may apply to ``user``, in visiting order, each once."""
        found = {binding.order: binding for binding in self.by_user.get(user.username, ())}
        for group in user.groups:
            found.update((binding.order, binding) for binding in self.by_group.get(group, ()))
        return [found[order] for order in sorted(found)]


_NO_BINDINGS = _BindingIndex({}, {})


def _metadata(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _not_found(resource: str, name: str) -> str:
    # apierrors.NewNotFound(rbacv1.Resource(resource), name), as the listers return it.
    return f"{resource}.{RBAC_GROUP} {go_quote(name)} not found"


def _compile_binding(
    order: int,
    obj: Mapping[str, Any],
    roles: Mapping[tuple[str, str], tuple[CompiledRule, ...]],
    cluster_roles: Mapping[str, tuple[CompiledRule, ...]],
    written: Mapping[tuple[str, str, str], tuple[Mapping[str, Any], ...]],
) -> _Binding:
    """Resolve a binding's roleRef now, as GetRoleReferenceRules would per request."""
    is_cluster = obj.get("kind") == "ClusterRoleBinding"
    namespace, name = _metadata(obj)
    if is_cluster:
        namespace = ""
    role_ref = obj.get("roleRef") or {}
    role_kind, role_name = str(role_ref.get("kind", "")), str(role_ref.get("name", ""))
    found: tuple[CompiledRule, ...] | None = None
    if role_kind == "Role":
        found = roles.get((namespace, role_name)) if namespace else None
        error = "" if found is not None else _not_found("role", role_name)
    elif role_kind == "ClusterRole":
        found = cluster_roles.get(role_name)
        error = "" if found is not None else _not_found("clusterrole", role_name)
    else:
        error = f"unsupported role reference kind: {go_quote(role_kind)}"
    subjects = tuple(
        _Subject(
            str(subject.get("kind", "")),
            str(subject.get("name", "")),
            str(subject.get("namespace") or ""),
        )
        for subject in obj.get("subjects") or ()
    )
    return _Binding(
        order=order,
        kind="ClusterRoleBinding" if is_cluster else "RoleBinding",
        name=name,
        namespace=namespace,
        role_kind=role_kind,
        role_name=role_name,
        subjects=subjects,
        rules=found or (),
        error=error,
        policy_rules=written.get((role_kind, namespace if role_kind == "Role" else "", role_name),
                                 ()) if not error else (),
    )  # fmt: skip


@dataclass
class RulesReview:
    """A SubjectRulesReviewStatus in the making (pkg/registry/authorization/
    selfsubjectrulesreview): resource and non-resource rules, and evaluation errors."""

    resource_rules: list[dict[str, Any]]
    non_resource_rules: list[dict[str, Any]]
    errors: list[str]

    def add(self, rule: Mapping[str, Any]) -> None:
        """One PolicyRule split as RBACAuthorizer.RulesFor splits it."""
        verbs = list(rule.get("verbs") or [])
        if rule.get("resources"):
            entry: dict[str, Any] = {"verbs": verbs}
            for key in ("apiGroups", "resources", "resourceNames"):
                if rule.get(key):
                    entry[key] = list(rule[key])
            self.resource_rules.append(entry)
        if rule.get("nonResourceURLs"):
            self.non_resource_rules.append(
                {"verbs": verbs, "nonResourceURLs": list(rule["nonResourceURLs"])}
            )

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"resourceRules": self.resource_rules,
                               "nonResourceRules": self.non_resource_rules,
                               "incomplete": False}  # fmt: skip
        if self.errors:
            out["evaluationError"] = go_aggregate(self.errors)
        return out


class RBACAuthorizer:
    """kube-apiserver's ``system:masters`` + RBAC authorizer chain over plain dicts.

    Call :meth:`update` with the full current set of Role, ClusterRole,
    RoleBinding and ClusterRoleBinding objects whenever any of them changes;
    :meth:`authorize` then answers from the compiled index.
    """

    def __init__(
        self,
        objects: Iterable[Mapping[str, Any]] = (),
        *,
        privileged_groups: Sequence[str] = (PRIVILEGED_GROUP,),
    ) -> None:
        self._privileged_groups = frozenset(privileged_groups)
        self._cluster = _BindingIndex({}, {})
        self._namespaced: dict[str, _BindingIndex] = {}
        self.update(objects)

    def update(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Replace every RBAC object; each dict needs ``kind`` (Role, ClusterRole, ...)."""
        roles: dict[tuple[str, str], tuple[CompiledRule, ...]] = {}
        cluster_roles: dict[str, tuple[CompiledRule, ...]] = {}
        bindings: list[Mapping[str, Any]] = []
        written: dict[tuple[str, str, str], tuple[Mapping[str, Any], ...]] = {}
        for obj in objects:
            kind = obj.get("kind")
            if kind in ("RoleBinding", "ClusterRoleBinding"):
                bindings.append(obj)
                continue
            namespace, name = _metadata(obj)
            rules = tuple(CompiledRule.from_rule(rule) for rule in obj.get("rules") or ())
            written[(str(kind), namespace if kind == "Role" else "", name)] = tuple(
                obj.get("rules") or ()
            )
            if kind == "Role":
                roles[(namespace, name)] = rules
            elif kind == "ClusterRole":
                cluster_roles[name] = rules
            else:
                raise ValueError(f"not an RBAC object kind: {kind!r}")

        cluster = _BindingIndex({}, {})
        namespaced: dict[str, _BindingIndex] = {}
        # ClusterRoleBindings are visited first (VisitRulesFor), then by namespace and name.
        ordered = sorted(
            bindings, key=lambda b: (b.get("kind") != "ClusterRoleBinding", *_metadata(b))
        )
        for order, obj in enumerate(ordered):
            binding = _compile_binding(order, obj, roles, cluster_roles, written)
            if binding.kind == "ClusterRoleBinding":
                cluster.add(binding)
            else:
                namespaced.setdefault(binding.namespace, _BindingIndex({}, {})).add(binding)
        self._cluster = cluster
        self._namespaced = namespaced

    def authorize(self, attrs: RequestAttributes) -> AuthorizationDecision:
        """Allow, with upstream's reason, or deny with ``""`` or ``"RBAC: <errors>"``."""
        if not self._privileged_groups.isdisjoint(attrs.user.groups):
            return AuthorizationDecision(True, "")
        errors: list[str] = []
        indexes = [self._cluster]
        if attrs.namespace:
            indexes.append(self._namespaced.get(attrs.namespace, _NO_BINDINGS))
        for index in indexes:
            for binding in index.candidates(attrs.user):
                subject = binding.first_applicable_subject(attrs.user)
                if subject is None:
                    continue
                if binding.error:
                    errors.append(binding.error)
                    continue
                if any(rule.allows(attrs) for rule in binding.rules):
                    return AuthorizationDecision(
                        True, f"RBAC: allowed by {binding.describe(subject)}"
                    )
        return AuthorizationDecision(False, f"RBAC: {go_aggregate(errors)}" if errors else "")

    def rules_for(self, user: UserInfo, namespace: str) -> RulesReview:
        """What ``user`` may do in ``namespace``: RBAC's ``RulesFor``, each rule as its role
        wrote it, ClusterRoleBindings first. The privileged group's authorizer is no rule
        resolver upstream (pkg/kubeapiserver/authorizer/reload.go): ``system:masters`` is
        answered with what RBAC binds to it."""
        review = RulesReview([], [], [])
        indexes = [self._cluster]
        if namespace:
            indexes.append(self._namespaced.get(namespace, _NO_BINDINGS))
        for index in indexes:
            for binding in index.candidates(user):
                if binding.first_applicable_subject(user) is None:
                    continue
                if binding.error:
                    review.errors.append(binding.error)
                for rule in binding.policy_rules:
                    review.add(rule)
        return review


# --- 403 Forbidden (responsewriters.Forbidden, apierrors.NewForbidden) ---

_HTML_SANITIZER = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _forbidden_detail(attrs: RequestAttributes) -> str:
    username = go_quote(attrs.user.username)
    if not attrs.is_resource_request:
        return f"User {username} cannot {attrs.verb} path {go_quote(attrs.path)}"
    resource = attrs.resource
    if attrs.subresource:
        resource = f"{resource}/{attrs.subresource}"
    head = (
        f"User {username} cannot {attrs.verb} resource {go_quote(resource)}"
        f" in API group {go_quote(attrs.api_group)}"
    )
    if attrs.namespace:
        return f"{head} in the namespace {go_quote(attrs.namespace)}"
    return f"{head} at the cluster scope"


def forbidden_message(attrs: RequestAttributes, reason: str = "") -> str:
    """The ``message`` of the 403 Status kube-apiserver sends for a denied request.

    E.g. ``pods "web-1" is forbidden: User "system:serviceaccount:gd:ctl" cannot
    create resource "pods/eviction" in API group "" in the namespace "default"``;
    a non-empty ``reason`` (the :class:`AuthorizationDecision`'s) is appended after ``": "``.
    """
    detail = _forbidden_detail(attrs).translate(_HTML_SANITIZER)
    if reason:
        detail = f"{detail}: {reason}"
    if not attrs.api_group and not attrs.resource:
        return f"forbidden: {detail}"
    group_resource = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    if not attrs.name:
        return f"{group_resource} is forbidden: {detail}"
    return f"{group_resource} {go_quote(attrs.name)} is forbidden: {detail}"


def forbidden_status(attrs: RequestAttributes, reason: str = "") -> dict[str, Any]:
    """The whole ``metav1.Status`` body of that 403, as kube-apiserver serialises it."""
    details = {
        key: value
        for key, value in (
            ("name", attrs.name),
            ("group", attrs.api_group),
            ("kind", attrs.resource),
        )
        if value
    }
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": forbidden_message(attrs, reason),
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }
