"""What the default scheduler's filter and score plugins decide, as pure functions over dicts.

Filters run in the default profile's order and stop at the first failure on a
node, as `RunFilterPlugins` does (pkg/scheduler/apis/config/v1/default_plugins.go):
NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit. Reasons
are the plugins' own strings, so `fit_error_message` reproduces `FitError.Error()`
(pkg/scheduler/framework/types.go) word for word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kubesim.identity_cache import IdentityCache
from kubesim.types import Obj

from .quantity import parse_or_zero

Code = Literal["Unschedulable", "UnschedulableAndUnresolvable"]

UNSCHEDULABLE: Code = "Unschedulable"
UNRESOLVABLE: Code = "UnschedulableAndUnresolvable"

# plugin reasons, word for word
ERR_NODE_UNSCHEDULABLE = "node(s) were unschedulable"  # nodeunschedulable
ERR_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"  # nodeaffinity
ERR_TOO_MANY_PODS = "Too many pods"  # noderesources/fit.go
ERR_NO_NODES = "no nodes available to schedule pods"  # schedule_one.go ErrNoNodesAvailable
NO_NODE_AVAILABLE = "0/{} nodes are available"  # framework.NoNodeAvailableMsg

TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")

# schedutil.DefaultMilliCPURequest / DefaultMemoryRequest, used only for scoring
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
MAX_NODE_SCORE = 100

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class FilterFailure:
    code: Code
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Resources:
    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.milli_cpu + other.milli_cpu,
            self.memory + other.memory,
            self.ephemeral_storage + other.ephemeral_storage,
        )

    def max(self, other: Resources) -> Resources:
        return Resources(
            max(self.milli_cpu, other.milli_cpu),
            max(self.memory, other.memory),
            max(self.ephemeral_storage, other.ephemeral_storage),
        )

    def is_zero(self) -> bool:
        return self.milli_cpu == 0 and self.memory == 0 and self.ephemeral_storage == 0


def resources_of(resource_list: Mapping[str, Any] | None) -> Resources:
    rl = resource_list or {}
    return Resources(
        parse_or_zero(rl.get("cpu")).milli_value() if "cpu" in rl else 0,
        parse_or_zero(rl.get("memory")).value() if "memory" in rl else 0,
        parse_or_zero(rl.get("ephemeral-storage")).value() if "ephemeral-storage" in rl else 0,
    )


def _container_requests(container: Obj, non_zero: bool) -> Resources:
    requests = (container.get("resources") or {}).get("requests") or {}
    found = resources_of(requests)
    if not non_zero:
        return found
    return Resources(
        found.milli_cpu if "cpu" in requests else DEFAULT_MILLI_CPU_REQUEST,
        found.memory if "memory" in requests else DEFAULT_MEMORY_REQUEST,
        found.ephemeral_storage,
    )


# Scoring a node sums the requests of every pod on it; the pods come from the informer,
# whose objects are never changed. One cache per view, by the pod's spec.
_REQUESTS: dict[bool, IdentityCache[Resources]] = {False: IdentityCache(), True: IdentityCache()}


def pod_requests(pod: Obj, non_zero: bool = False) -> Resources:
    """`resourcehelper.PodRequests`: containers and sidecars summed, init containers as a floor.

    `non_zero` gives the scheduler's scoring view, where a container without a
    cpu or memory request counts as 100m / 200Mi.
    """
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return _spec_requests({}, non_zero)
    return _REQUESTS[non_zero].get_or_compute(spec, lambda _: _spec_requests(spec, non_zero))


def _spec_requests(spec: Obj, non_zero: bool) -> Resources:
    total = Resources()
    for c in spec.get("containers") or []:
        total = total + _container_requests(c, non_zero)
    sidecars = Resources()
    floor = Resources()
    for c in spec.get("initContainers") or []:
        own = _container_requests(c, non_zero)
        if c.get("restartPolicy") == "Always":
            sidecars = sidecars + own
            total = total + own
        else:
            floor = floor.max(own + sidecars)
    total = total.max(floor)
    return total + resources_of(spec.get("overhead"))


def pod_priority(pod: Obj) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) else 0


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


# tolerations (k8s.io/api/core/v1/toleration.go)


def toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """`Toleration.ToleratesTaint`: an empty effect matches all effects, an empty key with
    Exists all keys."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def tolerations_tolerate(tolerations: Iterable[Obj], taint: Obj) -> bool:
    return any(toleration_tolerates(t, taint) for t in tolerations if isinstance(t, dict))


def first_untolerated_taint(
    taints: Iterable[Obj], tolerations: Iterable[Obj], effects: tuple[str, ...]
) -> Obj | None:
    """`v1helper.FindMatchingUntoleratedTaint` restricted to `effects`."""
    tols = [t for t in tolerations if isinstance(t, dict)]
    for taint in taints:
        if taint.get("effect") in effects and not tolerations_tolerate(tols, taint):
            return taint
    return None


def taint_reason(taint: Obj) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


# node affinity (k8s.io/component-helpers/scheduling/corev1/nodeaffinity)


def _int64(text: str) -> int | None:
    try:
        value = int(text, 10)
    except ValueError:
        return None
    return value if -(2**63) <= value < 2**63 else None


def requirement_matches(requirement: Obj, values_by_key: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement against labels (or fields); unknown operators never match."""
    key = requirement.get("key", "")
    operator = requirement.get("operator", "")
    values = [str(v) for v in requirement.get("values") or []]
    present = key in values_by_key
    actual = values_by_key.get(key, "")
    if operator == "In":
        return present and actual in values
    if operator == "NotIn":
        return not present or actual not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        have, want = _int64(actual), _int64(values[0])
        if have is None or want is None:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def term_matches(term: Obj, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
    """A NodeSelectorTerm: requirements ANDed; an empty term matches nothing."""
    expressions = term.get("matchExpressions") or []
    field_reqs = term.get("matchFields") or []
    if not expressions and not field_reqs:
        return False
    return all(requirement_matches(r, labels) for r in expressions) and all(
        requirement_matches(r, fields) for r in field_reqs
    )


def node_selector_matches(selector: Obj, node: Obj) -> bool:
    """A NodeSelector: its terms ORed."""
    labels = node.get("metadata", {}).get("labels") or {}
    fields = {"metadata.name": node.get("metadata", {}).get("name", "")}
    return any(term_matches(t, labels, fields) for t in selector.get("nodeSelectorTerms") or [])


def _required_affinity(pod: Obj) -> Obj | None:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return required if isinstance(required, dict) else None


def pod_matches_node_affinity(pod: Obj, node: Obj) -> bool:
    """`nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)`: nodeSelector AND required terms."""
    labels = node.get("metadata", {}).get("labels") or {}
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    required = _required_affinity(pod)
    return required is None or node_selector_matches(required, node)


# the filters


def node_allocatable(node: Obj) -> tuple[Resources, int]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return resources_of(allocatable), parse_or_zero(allocatable.get("pods")).value()


def fits_resources(
    pod: Obj, node: Obj, node_pods: Iterable[Obj], extra: Iterable[Obj] = ()
) -> list[str]:
    """NodeResourcesFit `fitsRequest`: insufficient resources, in upstream order.

    `extra` are pods counted as if already on the node (the nominated ones).
    """
    allocatable, allowed_pods = node_allocatable(node)
    on_node = [p for p in [*node_pods, *extra] if not is_terminal(p)]
    requested = Resources()
    for other in on_node:
        requested = requested + pod_requests(other)
    reasons = []
    if len(on_node) + 1 > allowed_pods:
        reasons.append(ERR_TOO_MANY_PODS)
    wanted = pod_requests(pod)
    if wanted.is_zero():
        return reasons
    if wanted.milli_cpu > 0 and wanted.milli_cpu > allocatable.milli_cpu - requested.milli_cpu:
        reasons.append("Insufficient cpu")
    if wanted.memory > 0 and wanted.memory > allocatable.memory - requested.memory:
        reasons.append("Insufficient memory")
    if (
        wanted.ephemeral_storage > 0
        and wanted.ephemeral_storage > allocatable.ephemeral_storage - requested.ephemeral_storage
    ):
        reasons.append("Insufficient ephemeral-storage")
    return reasons


def filter_node(
    pod: Obj, node: Obj, node_pods: Iterable[Obj], nominated: Iterable[Obj] = ()
) -> FilterFailure | None:
    """Run the default filters on one node; None means the pod fits."""
    spec = pod.get("spec") or {}
    tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    node_spec = node.get("spec") or {}
    if node_spec.get("unschedulable") and not tolerations_tolerate(
        tolerations, {"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}
    ):
        return FilterFailure(UNRESOLVABLE, (ERR_NODE_UNSCHEDULABLE,))
    taint = first_untolerated_taint(node_spec.get("taints") or [], tolerations, NO_SCHEDULE_EFFECTS)
    if taint is not None:
        return FilterFailure(UNRESOLVABLE, (taint_reason(taint),))
    if not pod_matches_node_affinity(pod, node):
        return FilterFailure(UNRESOLVABLE, (ERR_NODE_AFFINITY,))
    reasons = fits_resources(pod, node, node_pods, nominated)
    if reasons:
        return FilterFailure(UNSCHEDULABLE, tuple(reasons))
    return None


def fit_error_message(
    num_nodes: int,
    failures: Mapping[str, FilterFailure],
    post_filter_message: str = "",
    absent_reason: str = "",
) -> str:
    """`FitError.Error()`: "0/N nodes are available: <count reason, ...>. <post-filter message>".

    Nodes missing from `failures` are counted under `absent_reason` when given
    (preemption reports "Preemption is not helpful for scheduling" for them).
    """
    counts: Counter[str] = Counter()
    for failure in failures.values():
        counts.update(failure.reasons)
    if absent_reason and len(failures) < num_nodes:
        counts[absent_reason] += num_nodes - len(failures)
    message = NO_NODE_AVAILABLE.format(num_nodes) + ":"
    histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
    if histogram:
        message += f" {', '.join(histogram)}."
    if post_filter_message:
        message += f" {post_filter_message}"
    return message


# scores (all normalised to 0..100 before weighting, as the framework does)


def _least_allocated(requested: int, allocatable: int) -> int:
    if allocatable == 0 or requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_NODE_SCORE // allocatable


def least_allocated_score(pod: Obj, node: Obj, node_pods: Iterable[Obj]) -> int:
    """NodeResourcesFit's default LeastAllocated strategy over cpu and memory (weights 1)."""
    allocatable, _ = node_allocatable(node)
    requested = pod_requests(pod, non_zero=True)
    for other in node_pods:
        if not is_terminal(other):
            requested = requested + pod_requests(other, non_zero=True)
    cpu = _least_allocated(requested.milli_cpu, allocatable.milli_cpu)
    memory = _least_allocated(requested.memory, allocatable.memory)
    return (cpu + memory) // 2


def prefer_no_schedule_count(pod: Obj, node: Obj) -> int:
    """TaintToleration's raw score: PreferNoSchedule taints the pod does not tolerate."""
    tolerations = [
        t
        for t in (pod.get("spec") or {}).get("tolerations") or []
        if isinstance(t, dict) and (t.get("effect") or "") in ("", "PreferNoSchedule")
    ]
    taints = (node.get("spec") or {}).get("taints") or []
    return sum(
        1
        for taint in taints
        if taint.get("effect") == "PreferNoSchedule"
        and not tolerations_tolerate(tolerations, taint)
    )


def preferred_affinity_weight(pod: Obj, node: Obj) -> int:
    """NodeAffinity's raw score: the summed weights of matching preferred terms."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    labels = node.get("metadata", {}).get("labels") or {}
    fields = {"metadata.name": node.get("metadata", {}).get("name", "")}
    total = 0
    for preferred in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        term = preferred.get("preference") or {}
        if term_matches(term, labels, fields):
            total += int(preferred.get("weight") or 0)
    return total


def _normalize(raw: Mapping[str, int], reverse: bool) -> dict[str, int]:
    """`helper.DefaultNormalizeScore`."""
    highest = max(raw.values(), default=0)
    if highest == 0:
        return {name: MAX_NODE_SCORE if reverse else 0 for name in raw}
    out = {}
    for name, score in raw.items():
        scaled = MAX_NODE_SCORE * score // highest
        out[name] = MAX_NODE_SCORE - scaled if reverse else scaled
    return out


def score_nodes(
    pod: Obj, feasible: Mapping[str, Obj], pods_by_node: Mapping[str, list[Obj]]
) -> dict[str, int]:
    """Weighted sum of the resource, taint and affinity scores of each feasible node.

    Weights are the default profile's (TaintToleration 3, NodeAffinity 2,
    NodeResourcesFit 1); spreading comes from LeastAllocated.
    """
    taints = _normalize(
        {n: prefer_no_schedule_count(pod, node) for n, node in feasible.items()}, reverse=True
    )
    affinity = _normalize(
        {n: preferred_affinity_weight(pod, node) for n, node in feasible.items()}, reverse=False
    )
    return {
        name: 3 * taints[name]
        + 2 * affinity[name]
        + least_allocated_score(pod, node, pods_by_node.get(name, []))
        for name, node in feasible.items()
    }


def select_host(scores: Mapping[str, int]) -> str:
    """The best-scoring node; ties go to the first name (upstream picks at random)."""
    return min(scores, key=lambda name: (-scores[name], name))
