"""Server-side printing: the `meta.k8s.io/v1` Table kubectl asks for with `as=Table`.

Every built-in kind kubesim serves gets the columns and cells of
pkg/printers/internalversion/printers.go (:mod:`.printer_columns`, :mod:`.printers`), or, where
upstream has no printer either (Roles, ClusterRoles, CustomResourceDefinitions), the generic
Name and Created At of the default table convertor; custom resources their CRD's columns
(:mod:`.custom_tables`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from aiohttp import web

from kubesim.types import Obj

from . import custom_tables, printer_columns, printers
from .event_versions import to_core_event
from .hpa_versions import V1, to_v2
from .resources import ResourceType

Printer = Callable[[Obj, datetime], printers.Row]

PRINTERS: dict[tuple[str, str], tuple[tuple[printer_columns.ColumnDefinition, ...], Printer]] = {
    ("", "Pod"): (printer_columns.POD, printers.print_pod),
    ("", "Node"): (printer_columns.NODE, printers.print_node),
    ("apps", "Deployment"): (printer_columns.DEPLOYMENT, printers.print_deployment),
    ("apps", "ReplicaSet"): (printer_columns.REPLICA_SET, printers.print_replica_set),
    # Printed from the stored (v2) form whichever version was asked for.
    ("autoscaling", "HorizontalPodAutoscaler"): (
        printer_columns.HORIZONTAL_POD_AUTOSCALER,
        lambda hpa, now: printers.print_horizontal_pod_autoscaler(
            to_v2(hpa) if hpa.get("apiVersion") == V1 else hpa, now
        ),
    ),
    ("", "Namespace"): (printer_columns.NAMESPACE, printers.print_namespace),
    ("", "Secret"): (printer_columns.SECRET, printers.print_secret),
    ("", "ServiceAccount"): (printer_columns.SERVICE_ACCOUNT, printers.print_service_account),
    ("", "ConfigMap"): (printer_columns.CONFIG_MAP, printers.print_config_map),
    ("", "Event"): (printer_columns.EVENT, printers.print_event),
    # Printed as kube-apiserver does, from the internal (core) form.
    ("events.k8s.io", "Event"): (
        printer_columns.EVENT,
        lambda event, now: printers.print_event(to_core_event(event), now),
    ),
    ("", "Service"): (printer_columns.SERVICE, printers.print_service),
    ("", "Endpoints"): (printer_columns.ENDPOINTS, printers.print_endpoints),
    ("discovery.k8s.io", "EndpointSlice"): (
        printer_columns.ENDPOINT_SLICE,
        printers.print_endpoint_slice,
    ),
    ("apps", "StatefulSet"): (printer_columns.STATEFUL_SET, printers.print_stateful_set),
    ("apps", "DaemonSet"): (printer_columns.DAEMON_SET, printers.print_daemon_set),
    ("apps", "ControllerRevision"): (
        printer_columns.CONTROLLER_REVISION,
        printers.print_controller_revision,
    ),
    ("batch", "Job"): (printer_columns.JOB, printers.print_job),
    ("batch", "CronJob"): (printer_columns.CRON_JOB, printers.print_cron_job),
    ("policy", "PodDisruptionBudget"): (
        printer_columns.POD_DISRUPTION_BUDGET,
        printers.print_pod_disruption_budget,
    ),
    ("coordination.k8s.io", "Lease"): (printer_columns.LEASE, printers.print_lease),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): (
        printer_columns.VALIDATING_WEBHOOK,
        printers.print_validating_webhook,
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): (
        printer_columns.VALIDATING_ADMISSION_POLICY,
        printers.print_validating_admission_policy,
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): (
        printer_columns.VALIDATING_ADMISSION_POLICY_BINDING,
        printers.print_validating_admission_policy_binding,
    ),
    ("scheduling.k8s.io", "PriorityClass"): (
        printer_columns.PRIORITY_CLASS,
        printers.print_priority_class,
    ),
    ("networking.k8s.io", "NetworkPolicy"): (
        printer_columns.NETWORK_POLICY,
        printers.print_network_policy,
    ),
    ("rbac.authorization.k8s.io", "RoleBinding"): (
        printer_columns.ROLE_BINDING,
        printers.print_role_binding,
    ),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (
        printer_columns.CLUSTER_ROLE_BINDING,
        printers.print_role_binding,
    ),
}
# Roles, ClusterRoles and CustomResourceDefinitions have no printer upstream either: the
# generic Name and Created At.
GENERIC = (printer_columns.GENERIC, printers.print_generic)


def wants_table(accept: str) -> bool:
    for part in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in part.split(";")[1:] if "=" in p)
        if params.get("as") == "Table":
            return True
    return False


def _partial(obj: Obj) -> Obj:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def to_table(
    rt: ResourceType,
    objects: list[Obj],
    resource_version: str,
    request: web.BaseRequest,
    include_columns: bool = True,
) -> Obj:
    columns, printer = PRINTERS.get((rt.group, rt.kind), GENERIC)
    custom = rt.printer_columns
    if custom is not None:
        printer = lambda obj, now: printers.Row(custom_tables.cells(custom, obj))  # noqa: E731
    include = request.query.get("includeObject", "Metadata")
    now = datetime.now(UTC)
    rows = []
    for obj in objects:
        printed = printer(obj, now)
        row: Obj = {"cells": printed.cells}
        if printed.conditions:
            row["conditions"] = printed.conditions
        if include == "Object":
            row["object"] = obj
        elif include == "None":
            # TableRow.object is a RawExtension: `omitempty` leaves it in, as null.
            row["object"] = None
        else:
            row["object"] = _partial(obj)
        rows.append(row)
    table: Obj = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [],
        "rows": rows,
    }
    if include_columns and custom is not None:
        table["columnDefinitions"] = custom_tables.definitions(custom)
    elif include_columns:
        table["columnDefinitions"] = [column.to_json() for column in columns]
    return table
