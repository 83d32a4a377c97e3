"""The Table cells kube-apiserver computes for each built-in kind kubesim serves: a port of
the ``print<Kind>`` functions of pkg/printers/internalversion/printers.go (v1.34), always
``Wide`` as the server prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubesim.apiserver.selectors.labels import SelectorError, label_selector_from_object
from kubesim.types import Obj

from .humanduration import human_duration, parse_timestamp, translate_timestamp_since

NODE_UNREACHABLE_POD_REASON = "NodeLost"  # pkg/util/node
LABEL_NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
NODE_LABEL_ROLE = "kubernetes.io/role"

_POD_SUCCEEDED_CONDITION = {
    "type": "Completed", "status": "True", "reason": "Succeeded",
    "message": "The pod has completed successfully.",
}  # fmt: skip
_POD_FAILED_CONDITION = {
    "type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed.",
}  # fmt: skip


@dataclass(frozen=True)
class Row:
    cells: list[Any]
    conditions: list[Obj] = field(default_factory=list)


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _age(obj: Obj, now: datetime) -> str:
    return translate_timestamp_since(obj["metadata"].get("creationTimestamp"), now)


def print_generic(obj: Obj, now: datetime) -> Row:
    """pkg/registry/rest/table.go: Name, Created At (the timestamp itself)."""
    return Row([_name(obj), obj["metadata"].get("creationTimestamp")])


# --- pods ---------------------------------------------------------------------------------


def _is_restartable_init_container(container: Obj | None) -> bool:
    return container is not None and container.get("restartPolicy") == "Always"


def _condition_true(conditions: Sequence[Obj], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


def _later(current: str | None, candidate: Obj) -> str | None:
    """The later of ``current`` and the ``finishedAt`` of a last termination, if any."""
    terminated = (candidate.get("lastTerminationState") or {}).get("terminated")
    finished = (terminated or {}).get("finishedAt")
    if not finished:
        return current
    if current is None or parse_timestamp(current) < parse_timestamp(finished):
        return str(finished)
    return current


def _terminated_reason(terminated: Obj, prefix: str) -> str:
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def print_pod(pod: Obj, now: datetime) -> Row:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    conditions: list[Obj] = status.get("conditions") or []
    init_specs: list[Obj] = spec.get("initContainers") or []
    restarts = 0
    restartable_init_restarts = 0
    total = len(spec.get("containers") or [])
    ready = 0
    last_restart: str | None = None
    last_restartable_init_restart: str | None = None

    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for condition in conditions:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    row_conditions: list[Obj] = []
    if phase == "Succeeded":
        row_conditions = [_POD_SUCCEEDED_CONDITION]
    elif phase == "Failed":
        row_conditions = [_POD_FAILED_CONDITION]

    init_containers = {c["name"]: c for c in init_specs}
    total += sum(1 for c in init_specs if _is_restartable_init_container(c))

    initializing = False
    for i, container in enumerate(status.get("initContainerStatuses") or []):
        restarts += int(container.get("restartCount") or 0)
        last_restart = _later(last_restart, container)
        restartable = _is_restartable_init_container(init_containers.get(container.get("name", "")))
        if restartable:
            restartable_init_restarts += int(container.get("restartCount") or 0)
            last_restartable_init_restart = _later(last_restartable_init_restart, container)
        state = container.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated is not None and (terminated.get("exitCode") or 0) == 0:
            continue
        if restartable and container.get("started"):
            if container.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            reason = (
                "Init:" + terminated["reason"]
                if terminated.get("reason")
                else _terminated_reason(terminated, "Init:")
            )
        elif (
            waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing"
        ):
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_true(conditions, "Initialized"):
        restarts = restartable_init_restarts
        last_restart = last_restartable_init_restart
        has_running = False
        for container in reversed(status.get("containerStatuses") or []):
            restarts += int(container.get("restartCount") or 0)
            last_restart = _later(last_restart, container)
            state = container.get("state") or {}
            waiting = state.get("waiting")
            terminated = state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                reason = _terminated_reason(terminated, "")
            elif container.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        # A container still running turns "Completed" back into Running (or NotReady).
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"

    deleting = pod["metadata"].get("deletionTimestamp") is not None
    if deleting and status.get("reason") == NODE_UNREACHABLE_POD_REASON:
        reason = "Unknown"
    elif deleting and phase not in ("Failed", "Succeeded"):
        reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts != 0 and last_restart is not None:
        restarts_cell = f"{restarts} ({translate_timestamp_since(last_restart, now)} ago)"

    pod_ips = status.get("podIPs") or []
    gates: list[Obj] = spec.get("readinessGates") or []
    readiness_gates = "<none>"
    if gates:
        by_type: dict[str, Obj] = {}
        for condition in conditions:
            by_type.setdefault(condition.get("type", ""), condition)
        true_gates = sum(
            1
            for g in gates
            if (by_type.get(g.get("conditionType", "")) or {}).get("status") == "True"
        )
        readiness_gates = f"{true_gates}/{len(gates)}"
    cells = [
        _name(pod),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        _age(pod, now),
        (pod_ips[0].get("ip") if pod_ips else "") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        readiness_gates,
    ]
    return Row(cells, row_conditions)


# --- workloads ----------------------------------------------------------------------------


def _container_cells(template: Obj) -> tuple[str, str]:
    containers = (template.get("spec") or {}).get("containers") or []
    return ",".join(c.get("name", "") for c in containers), ",".join(
        c.get("image", "") for c in containers
    )


def _selector(selector: Obj | None) -> str:
    """``metav1.LabelSelectorAsSelector(...).String()``; raises for an invalid selector."""
    return str(label_selector_from_object(selector))


def print_replica_set(rs: Obj, now: datetime) -> Row:
    spec = rs.get("spec") or {}
    status = rs.get("status") or {}
    names, images = _container_cells(spec.get("template") or {})
    try:  # metav1.FormatLabelSelector
        selector = _selector(spec.get("selector")) or "<none>"
    except SelectorError:
        selector = "<error>"
    cells = [
        _name(rs),
        int(spec.get("replicas", 1)),
        int(status.get("replicas") or 0),
        int(status.get("readyReplicas") or 0),
        _age(rs, now),
        names,
        images,
        selector,
    ]
    return Row(cells)


def print_deployment(deployment: Obj, now: datetime) -> Row:
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    names, images = _container_cells(spec.get("template") or {})
    try:
        selector = _selector(spec.get("selector"))
    except SelectorError:
        selector = "<invalid>"
    cells = [
        _name(deployment),
        f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas', 1))}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        _age(deployment, now),
        names,
        images,
        selector,
    ]
    return Row(cells)


# --- nodes --------------------------------------------------------------------------------


def node_roles(labels: dict[str, str]) -> list[str]:
    """``findNodeRoles``: ``node-role.kubernetes.io/<role>`` keys, ``kubernetes.io/role`` values."""
    roles: set[str] = set()
    for key, value in labels.items():
        if key.startswith(LABEL_NODE_ROLE_PREFIX):
            if role := key.removeprefix(LABEL_NODE_ROLE_PREFIX):
                roles.add(role)
        elif key == NODE_LABEL_ROLE and value:
            roles.add(value)
    return sorted(roles)


def _node_address(status: Obj, type_: str) -> str:
    for address in status.get("addresses") or []:
        if address.get("type") == type_:
            return str(address.get("address", ""))
    return "<none>"


def print_node(node: Obj, now: datetime) -> Row:
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    # Only the Ready condition is shown (NodeAllConditions); the last of a duplicated type wins.
    ready = {c.get("type"): c for c in status.get("conditions") or []}.get("Ready")
    shown = (
        ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    )
    if spec.get("unschedulable"):
        shown.append("SchedulingDisabled")
    info = status.get("nodeInfo") or {}
    cells = [
        _name(node),
        ",".join(shown),
        ",".join(node_roles(node["metadata"].get("labels") or {})) or "<none>",
        _age(node, now),
        info.get("kubeletVersion", ""),
        _node_address(status, "InternalIP"),
        _node_address(status, "ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]
    return Row(cells)


# --- horizontal pod autoscalers -----------------------------------------------------------


def _target(spec: Obj, status: Obj | None, named: bool) -> str:
    """One metric of ``formatHPAMetrics`` (Resource, ContainerResource, Pods, Object or
    External): current/target, ``(avg)`` for an object or external average value.
    Quantities are printed as the client wrote them (upstream prints their canonical form)."""
    target = spec.get("target") or {}
    current = (status or {}).get("current") or {}
    prefix = f"{spec.get('name', '')}: " if named else ""
    if named and target.get("averageValue") is None:
        now = current.get("averageUtilization")
        utilization = target.get("averageUtilization")
        shown = "<auto>" if utilization is None else f"{utilization}%"
        return f"{prefix}{'<unknown>' if now is None else f'{now}%'}/{shown}"
    if target.get("averageValue") is not None:
        now = current.get("averageValue")
        return f"{prefix}{'<unknown>' if now is None else now}/{target['averageValue']}"
    now = current.get("value")
    return f"{prefix}{'<unknown>' if now is None else now}/{target.get('value')}"


_METRIC_SOURCES = {
    "Resource": ("resource", True),
    "ContainerResource": ("containerResource", True),
    "Pods": ("pods", False),
    "Object": ("object", False),
    "External": ("external", False),
}


def format_hpa_metrics(specs: Sequence[Obj], statuses: Sequence[Obj]) -> str:
    """``formatHPAMetrics``: at most two metrics, then ``+ N more...``."""
    if not specs:
        return "<none>"
    shown: list[str] = []
    for i, spec in enumerate(specs):
        source = _METRIC_SOURCES.get(str(spec.get("type")))
        if source is None:
            shown.append("<unknown type>")
            continue
        key, named = source
        status = statuses[i].get(key) if i < len(statuses) else None
        text = _target(spec.get(key) or {}, status, named)
        if (
            key in ("object", "external")
            and (spec.get(key) or {}).get("target", {}).get("averageValue") is not None
        ):
            text += " (avg)"
        shown.append(text)
    if len(shown) > 2:
        return f"{', '.join(shown[:2])} + {len(shown) - 2} more..."
    return ", ".join(shown)


def print_horizontal_pod_autoscaler(hpa: Obj, now: datetime) -> Row:
    spec = hpa.get("spec") or {}
    status = hpa.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    min_replicas = spec.get("minReplicas")
    cells = [
        _name(hpa),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        format_hpa_metrics(spec.get("metrics") or [], status.get("currentMetrics") or []),
        "<unset>" if min_replicas is None else str(min_replicas),
        int(spec.get("maxReplicas") or 0),
        int(status.get("currentReplicas") or 0),
        _age(hpa, now),
    ]
    return Row(cells)


# --- the other kinds kubesim serves -------------------------------------------------------


def format_labels(labels: dict[str, str] | None) -> str:
    """``labels.FormatLabels``: ``k=v`` pairs sorted by key, ``<none>`` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{key}={labels[key]}" for key in sorted(labels))


def format_label_selector(selector: Obj | None) -> str:
    """``metav1.FormatLabelSelector``."""
    if selector is None:
        return "<none>"
    try:
        return _selector(selector) or "<none>"
    except SelectorError:
        return "<error>"


def print_namespace(namespace: Obj, now: datetime) -> Row:
    phase = (namespace.get("status") or {}).get("phase") or ""
    return Row([_name(namespace), phase, _age(namespace, now)])


def print_secret(secret: Obj, now: datetime) -> Row:
    data = secret.get("data") or {}
    return Row([_name(secret), secret.get("type") or "", len(data), _age(secret, now)])


def print_service_account(account: Obj, now: datetime) -> Row:
    return Row([_name(account), len(account.get("secrets") or []), _age(account, now)])


def print_config_map(config_map: Obj, now: datetime) -> Row:
    count = len(config_map.get("data") or {}) + len(config_map.get("binaryData") or {})
    return Row([_name(config_map), count, _age(config_map, now)])


def _micro_time_since(timestamp: str | None, now: datetime) -> str:
    """``translateMicroTimestampSince``."""
    return translate_timestamp_since(timestamp, now)


def print_event(event: Obj, now: datetime) -> Row:
    """``printEvent`` (core/v1 form; events.k8s.io/v1 Events are printed converted to it)."""
    first = event.get("firstTimestamp")
    first_seen = (
        translate_timestamp_since(first, now)
        if first
        else _micro_time_since(event.get("eventTime"), now)
    )
    last = event.get("lastTimestamp")
    last_seen = translate_timestamp_since(last, now) if last else first_seen
    count = int(event.get("count") or 0)
    series = event.get("series")
    if series is not None:
        last_seen = _micro_time_since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    cells = [
        last_seen,
        event.get("type") or "",
        event.get("reason") or "",
        target,
        involved.get("fieldPath") or "",
        f"{component}, {host}" if host else component,
        str(event.get("message") or "").strip(),
        first_seen,
        count,
        _name(event),
    ]
    return Row(cells)


def _service_external_ip(service: Obj) -> str:
    """``getServiceExternalIP`` (wide: load-balancer addresses not cut short)."""
    spec = service.get("spec") or {}
    external: list[str] = spec.get("externalIPs") or []
    type_ = spec.get("type")
    if type_ in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if type_ == "LoadBalancer":
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        balancers = sorted({i.get("ip") or i.get("hostname") for i in ingress} - {None, ""})
        if external:
            return ",".join([*balancers, *external])
        return ",".join(balancers) if balancers else "<pending>"
    if type_ == "ExternalName":
        return str(spec.get("externalName") or "")
    return "<unknown>"


def _service_ports(ports: Sequence[Obj]) -> str:
    """``makePortString``."""
    pieces = []
    for port in ports:
        protocol = port.get("protocol", "")
        if int(port.get("nodePort") or 0) > 0:
            pieces.append(f"{port.get('port')}:{port['nodePort']}/{protocol}")
        else:
            pieces.append(f"{port.get('port')}/{protocol}")
    return ",".join(pieces)


def print_service(service: Obj, now: datetime) -> Row:
    spec = service.get("spec") or {}
    cluster_ips = spec.get("clusterIPs") or []
    cells = [
        _name(service),
        spec.get("type") or "",
        cluster_ips[0] if cluster_ips else "<none>",
        _service_external_ip(service),
        _service_ports(spec.get("ports") or []) or "<none>",
        _age(service, now),
        format_labels(spec.get("selector")),
    ]
    return Row(cells)


def print_stateful_set(stateful_set: Obj, now: datetime) -> Row:
    spec = stateful_set.get("spec") or {}
    status = stateful_set.get("status") or {}
    names, images = _container_cells(spec.get("template") or {})
    ready = f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas', 1))}"
    return Row([_name(stateful_set), ready, _age(stateful_set, now), names, images])


_DAEMON_SET_COUNTS = (
    "desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled",
    "numberAvailable",
)  # fmt: skip


def print_daemon_set(daemon_set: Obj, now: datetime) -> Row:
    spec = daemon_set.get("spec") or {}
    status = daemon_set.get("status") or {}
    template = spec.get("template") or {}
    names, images = _container_cells(template)
    cells = [
        _name(daemon_set),
        *(int(status.get(field) or 0) for field in _DAEMON_SET_COUNTS),
        format_labels((template.get("spec") or {}).get("nodeSelector")),
        _age(daemon_set, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]
    return Row(cells)


def _controller_of(obj: Obj) -> Obj | None:
    owners: list[Obj] = obj["metadata"].get("ownerReferences") or []
    return next((o for o in owners if o.get("controller")), None)


def print_controller_revision(revision: Obj, now: datetime) -> Row:
    """The controller as ``formatResourceName``: ``kind.group/name`` in lower case."""
    controller = _controller_of(revision)
    shown = "<none>"
    if controller is not None:
        group = str(controller.get("apiVersion") or "").rpartition("/")[0]
        kind = str(controller.get("kind") or "")
        group_kind = f"{kind}.{group}" if group else kind
        name = str(controller.get("name") or "")
        shown = f"{group_kind.lower()}/{name}" if group_kind else name
    return Row([_name(revision), shown, int(revision.get("revision") or 0), _age(revision, now)])


def _has_condition(conditions: Sequence[Obj], type_: str) -> bool:
    return _condition_true(conditions, type_)


def print_job(job: Obj, now: datetime) -> Row:
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif int(spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    start, end = status.get("startTime"), status.get("completionTime")
    duration = ""
    if start and not end:
        duration = human_duration(now - parse_timestamp(start))
    elif start and end:
        duration = human_duration(parse_timestamp(end) - parse_timestamp(start))
    conditions: list[Obj] = status.get("conditions") or []
    if _has_condition(conditions, "Complete"):
        state = "Complete"
    elif _has_condition(conditions, "Failed"):
        state = "Failed"
    elif job["metadata"].get("deletionTimestamp") is not None:
        state = "Terminating"
    elif _has_condition(conditions, "Suspended"):
        state = "Suspended"
    elif _has_condition(conditions, "FailureTarget"):
        state = "FailureTarget"
    elif _has_condition(conditions, "SuccessCriteriaMet"):
        state = "SuccessCriteriaMet"
    else:
        state = "Running"
    names, images = _container_cells(spec.get("template") or {})
    cells = [
        _name(job), state, completions, duration, _age(job, now), names, images,
        format_label_selector(spec.get("selector")),
    ]  # fmt: skip
    return Row(cells)


def print_cron_job(cronjob: Obj, now: datetime) -> Row:
    spec = cronjob.get("spec") or {}
    status = cronjob.get("status") or {}
    last = status.get("lastScheduleTime")
    suspend = spec.get("suspend")
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    names, images = _container_cells(job_spec.get("template") or {})
    cells = [
        _name(cronjob), spec.get("schedule", ""), spec.get("timeZone") or "<none>",
        "<unset>" if suspend is None else ("True" if suspend else "False"),
        len(status.get("active") or []),
        human_duration(now - parse_timestamp(last)) if last else "<none>",
        _age(cronjob, now), names, images, format_label_selector(job_spec.get("selector")),
    ]  # fmt: skip
    return Row(cells)


def print_pod_disruption_budget(budget: Obj, now: datetime) -> Row:
    spec = budget.get("spec") or {}
    shown = [
        "N/A" if spec.get(field) is None else str(spec[field])
        for field in ("minAvailable", "maxUnavailable")
    ]
    allowed = int((budget.get("status") or {}).get("disruptionsAllowed") or 0)
    return Row([_name(budget), *shown, allowed, _age(budget, now)])


def print_lease(lease: Obj, now: datetime) -> Row:
    holder = (lease.get("spec") or {}).get("holderIdentity") or ""
    return Row([_name(lease), holder, _age(lease, now)])


def print_validating_webhook(configuration: Obj, now: datetime) -> Row:
    webhooks = configuration.get("webhooks") or []
    return Row([_name(configuration), len(webhooks), _age(configuration, now)])


def print_validating_admission_policy(policy: Obj, now: datetime) -> Row:
    spec = policy.get("spec") or {}
    param_kind = spec.get("paramKind")
    shown = "<unset>"
    if param_kind is not None:
        shown = f"{param_kind.get('apiVersion', '')}/{param_kind.get('kind', '')}"
    return Row([_name(policy), len(spec.get("validations") or []), shown, _age(policy, now)])


def print_validating_admission_policy_binding(binding: Obj, now: datetime) -> Row:
    spec = binding.get("spec") or {}
    ref = spec.get("paramRef")
    shown = "<unset>"
    if ref is not None and ref.get("name"):
        shown = f"{ref.get('namespace') or '*'}/{ref['name']}"
    elif ref is not None and ref.get("selector") is not None:
        shown = format_label_selector(ref["selector"])
    return Row([_name(binding), spec.get("policyName") or "", shown, _age(binding, now)])


def print_priority_class(priority_class: Obj, now: datetime) -> Row:
    cells = [
        _name(priority_class),
        int(priority_class.get("value") or 0),
        bool(priority_class.get("globalDefault")),
        _age(priority_class, now),
        priority_class.get("preemptionPolicy") or "",
    ]
    return Row(cells)


def print_network_policy(policy: Obj, now: datetime) -> Row:
    selector = (policy.get("spec") or {}).get("podSelector") or {}
    return Row([_name(policy), format_label_selector(selector), _age(policy, now)])


def print_role_binding(binding: Obj, now: datetime) -> Row:
    """``printRoleBinding`` and ``printClusterRoleBinding``."""
    ref = binding.get("roleRef") or {}
    users: list[str] = []
    groups: list[str] = []
    accounts: list[str] = []
    for subject in binding.get("subjects") or []:
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            accounts.append(f"{subject.get('namespace', '')}/{subject.get('name', '')}")
        elif kind == "User":
            users.append(str(subject.get("name", "")))
        elif kind == "Group":
            groups.append(str(subject.get("name", "")))
    cells = [
        _name(binding),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(binding, now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(accounts),
    ]
    return Row(cells)


def _list_with_more(shown: list[str], more: bool, count: int, limit: int) -> str:
    """``listWithMoreString``."""
    text = ",".join(shown)
    return f"{text} + {count - limit} more..." if more else text


def _join_host_port(ip: str, port: int) -> str:
    """``net.JoinHostPort``: an IPv6 address in brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def print_endpoints(endpoints: Obj, now: datetime) -> Row:
    """``printEndpoints``: ``formatEndpoints`` with every port, at most three addresses."""
    subsets: list[Obj] = endpoints.get("subsets") or []
    limit, more, count = 3, False, 0
    shown: list[str] = []
    for subset in subsets:
        addresses = subset.get("addresses") or []
        ports = subset.get("ports") or []
        pairs = (
            [(a.get("ip", ""), None) for a in addresses]
            if not ports
            else [(a.get("ip", ""), int(p.get("port") or 0)) for p in ports for a in addresses]
        )
        count += len(pairs)
        for ip, port in pairs:
            if len(shown) == limit:
                more = True
                continue
            shown.append(ip if port is None else _join_host_port(ip, port))
    cell = "<none>" if not subsets else _list_with_more(shown, more, count, limit)
    return Row([_name(endpoints), cell, _age(endpoints, now)])


def print_endpoint_slice(endpoint_slice: Obj, now: datetime) -> Row:
    """``printEndpointSlice``: at most three ports and three addresses."""
    limit = 3
    ports: list[Obj] = endpoint_slice.get("ports") or []
    port_cells = [
        str(p["port"]) if p.get("port") is not None else (p.get("name") or "*") for p in ports
    ]
    addresses = [a for e in endpoint_slice.get("endpoints") or [] for a in e.get("addresses") or []]
    cells = [
        _name(endpoint_slice),
        endpoint_slice.get("addressType") or "",
        _list_with_more(port_cells[:limit], len(port_cells) > limit, len(port_cells), limit),
        _list_with_more(addresses[:limit], len(addresses) > limit, len(addresses), limit),
        _age(endpoint_slice, now),
    ]
    return Row(cells)
