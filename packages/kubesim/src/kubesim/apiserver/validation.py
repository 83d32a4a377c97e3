"""The validation errors clients can trip over, with upstream wording.

Not the whole of pkg/apis/*/validation: only what callers of kubesim rely on
being rejected (missing names, selectors that do not match templates, ...).
"""

from __future__ import annotations

import json
from typing import Any

from kubesim import cron
from kubesim.types import Obj

from .crds import GROUP as CRD_GROUP
from .crds import crd_causes
from .errors import ApiError, invalid
from .hpa_validation import horizontal_pod_autoscaler_causes
from .meta import is_dns1123_subdomain
from .resources import ResourceType

DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _go_map(labels: dict[str, Any]) -> str:
    inner = ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
    return f"map[string]string{{{inner}}}"


def _selector_matches(selector: Obj, labels: dict[str, Any]) -> bool:
    # matchLabels only; matchExpressions are checked by the selectors module at runtime.
    match_labels = selector.get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in match_labels.items())


WORKLOADS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")


def _workload_causes(obj: Obj) -> list[tuple[str, str]]:
    spec = obj.get("spec") or {}
    causes: list[tuple[str, str]] = []
    selector = spec.get("selector")
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not isinstance(selector, dict) or not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    ):
        causes.append(("spec.selector", "Required value"))
    elif not _selector_matches(selector, labels):
        causes.append(
            (
                "spec.template.metadata.labels",
                f"Invalid value: {_go_map(labels)}: `selector` does not match template `labels`",
            )
        )
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        causes.append(
            ("spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0")
        )
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers")
    if not containers:
        causes.append(("spec.template.spec.containers", "Required value"))
    return causes


# Kinds whose validation does not ask for a DNS subdomain name: RBAC objects (ValidateRBACName)
# and PodDisruptionBudgets (ValidatePodDisruptionBudget checks only the spec); the generic
# registry still refuses a name that is not a path segment.
NAME_IS_A_PATH_SEGMENT = frozenset(
    {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "PodDisruptionBudget"}
)


def _event_causes(obj: Obj) -> list[tuple[str, str]]:
    """legacyValidateEvent's namespace rule, which every Event meets whatever its version."""
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    involved = (obj.get("involvedObject") or {}).get("namespace") or ""
    if obj.get("eventTime"):
        agrees = bool(involved) or namespace in ("default", "kube-system")
    else:
        agrees = namespace == involved if involved else namespace in ("", "default")
    if agrees:
        return []
    return [("involvedObject.namespace",
             f"Invalid value: {json.dumps(involved)}: does not match event.namespace")]  # fmt: skip


def validate_events_v1_create(obj: Obj) -> None:
    """What ValidateEventCreate adds for an Event created through events.k8s.io/v1 (`obj`
    in that version)."""
    if not obj.get("eventTime"):
        name = (obj.get("metadata") or {}).get("name", "")
        raise invalid("", "Event", name, [("eventTime", "Required value")])


def _lease_causes(obj: Obj) -> list[tuple[str, str]]:
    """ValidateLeaseSpec's bounds."""
    spec = obj.get("spec") or {}
    causes = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        causes.append(("spec.leaseDurationSeconds",
                       f"Invalid value: {duration}: must be greater than 0"))  # fmt: skip
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        bound = "must be greater than or equal to 0"
        causes.append(("spec.leaseTransitions", f"Invalid value: {transitions}: {bound}"))
    return causes


CRONJOB_NAME_MAX = 52  # 63 less the 11 characters of the Jobs' suffix


def _cronjob_causes(obj: Obj) -> list[tuple[str, str]]:
    """ValidateCronJobCreate's spec rules: the schedule as robfig/cron parses it, the time
    zone as time.LoadLocation loads it, the name's length, the job template's restartPolicy."""
    spec = obj.get("spec") or {}
    causes: list[tuple[str, str]] = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    if len(name) > CRONJOB_NAME_MAX:
        causes.append(("metadata.name", f'Invalid value: "{name}": must be no more than '
                       f"{CRONJOB_NAME_MAX} characters"))  # fmt: skip
    schedule = spec.get("schedule")
    if not schedule:
        causes.append(("spec.schedule", "Required value"))
    elif str(schedule).strip().startswith(("TZ=", "CRON_TZ=")):
        causes.append(("spec.schedule", f"Invalid value: {json.dumps(schedule)}: cannot use TZ "
                       "or CRON_TZ in schedule, use timeZone field instead"))  # fmt: skip
    else:
        try:
            cron.parse(str(schedule))
        except cron.CronError as err:
            causes.append(("spec.schedule", f"Invalid value: {json.dumps(schedule)}: {err}"))
    zone = spec.get("timeZone")
    if zone is not None:
        if not zone:
            causes.append(("spec.timeZone", "Invalid value: \"\": timeZone must be nil or "
                           "non-empty string"))  # fmt: skip
        else:
            try:
                cron.zone(str(zone))
            except cron.CronError as err:
                causes.append(("spec.timeZone", f"Invalid value: {json.dumps(zone)}: {err}"))
    if spec.get("concurrencyPolicy") not in ("Allow", "Forbid", "Replace"):
        causes.append(("spec.concurrencyPolicy", "Unsupported value: "
                       f"{json.dumps(spec.get('concurrencyPolicy'))}: supported values: "
                       '"Allow", "Forbid", "Replace"'))  # fmt: skip
    template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    if (template.get("spec") or {}).get("restartPolicy") not in ("OnFailure", "Never"):
        causes.append(("spec.jobTemplate.spec.template.spec.restartPolicy",
                       'Required value: valid values: "OnFailure", "Never"'))  # fmt: skip
    return causes


def validate(rt: ResourceType, obj: Obj) -> None:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    causes: list[tuple[str, str]] = []
    if not name:
        causes.append(("metadata.name", "Required value: name or generateName is required"))
    elif rt.kind not in NAME_IS_A_PATH_SEGMENT and not is_dns1123_subdomain(name):
        causes.append(("metadata.name", f'Invalid value: "{name}": {DNS1123_SUBDOMAIN_MESSAGE}'))
    if rt.kind in WORKLOADS:
        causes += _workload_causes(obj)
    if rt.kind == "Job":
        policy = (
            ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("restartPolicy")
        )
        if policy not in ("OnFailure", "Never"):
            causes.append(("spec.template.spec.restartPolicy",
                           'Required value: valid values: "OnFailure", "Never"'))  # fmt: skip
    elif rt.kind == "CronJob" and rt.group == "batch":
        causes += _cronjob_causes(obj)
    elif rt.kind == "Pod" and not (obj.get("spec") or {}).get("containers"):
        causes.append(("spec.containers", "Required value"))
    elif rt.kind == "Event" and not rt.group:
        causes += _event_causes(obj)
    elif rt.kind == "Lease":
        causes += _lease_causes(obj)
    elif rt.kind == "CustomResourceDefinition" and rt.group == CRD_GROUP:
        causes += crd_causes(obj)
    elif rt.kind == "HorizontalPodAutoscaler":
        causes += horizontal_pod_autoscaler_causes(obj)
    elif rt.kind == "PodDisruptionBudget":
        spec = obj.get("spec") or {}
        if "minAvailable" in spec and "maxUnavailable" in spec:
            causes.append(
                ("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set")
            )
    if causes:
        raise invalid(rt.group, rt.kind, name, causes)


def check_immutable(rt: ResourceType, old: Obj, new: Obj) -> None:
    if rt.kind in WORKLOADS:
        before = (old.get("spec") or {}).get("selector")
        after = (new.get("spec") or {}).get("selector")
        if before != after:
            raise invalid(
                rt.group,
                rt.kind,
                new["metadata"]["name"],
                [("spec.selector", f"Invalid value: {after}: field is immutable")],
            )
    if rt.kind == "Pod":
        old_node = (old.get("spec") or {}).get("nodeName")
        new_node = (new.get("spec") or {}).get("nodeName")
        if old_node and old_node != new_node:
            raise ApiError(
                422,
                f'Pod "{new["metadata"]["name"]}" is invalid: spec: Forbidden: pod updates may '
                "not change fields other than `spec.containers[*].image`, ...",
                "Invalid",
            )


def check_finalizers_update(rt: ResourceType, old: Obj, new: Obj) -> None:
    """ValidateObjectMetaUpdate: an object being deleted takes no new finalizer. Upstream
    runs the check twice (the strategy's and the generic registry's), so the Status holds
    the same cause twice."""
    old_meta, meta = old["metadata"], new["metadata"]
    if not old_meta.get("deletionTimestamp"):
        return
    before = set(old_meta.get("finalizers") or [])
    added = [f for f in meta.get("finalizers") or [] if f not in before]
    if added:
        shown = ", ".join(json.dumps(f) for f in added)
        message = ("Forbidden: no new finalizers can be added if the object is being deleted, "
                   f"found new finalizers []string{{{shown}}}")  # fmt: skip
        raise invalid(rt.group, rt.kind, meta["name"], [("metadata.finalizers", message)] * 2)
