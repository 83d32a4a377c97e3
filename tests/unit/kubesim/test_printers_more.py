"""kube-apiserver's Table cells for the other kinds kubesim serves (pure), cases after
printers.go's printEvent, printService, printJob, printControllerRevision and friends."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver import printers
from kubesim.apiserver.tables import Printer

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
CREATED = "2026-01-01T11:57:00Z"  # 3m before NOW


def obj(**fields: Any) -> Obj:
    return {"metadata": {"name": "x", "creationTimestamp": CREATED}, **fields}


@pytest.mark.parametrize(
    ("printer", "value", "cells"),
    [
        (printers.print_namespace, obj(status={"phase": "Active"}), ["x", "Active", "3m"]),
        (printers.print_namespace, obj(), ["x", "", "3m"]),
        (printers.print_secret, obj(type="Opaque", data={"a": "", "b": ""}),
         ["x", "Opaque", 2, "3m"]),
        (printers.print_service_account, obj(secrets=[{"name": "t"}]), ["x", 1, "3m"]),
        (printers.print_config_map, obj(data={"a": ""}, binaryData={"b": ""}), ["x", 2, "3m"]),
        (printers.print_lease, obj(spec={"holderIdentity": "me"}), ["x", "me", "3m"]),
        (printers.print_pod_disruption_budget,
         obj(spec={"minAvailable": 1}, status={"disruptionsAllowed": 2}),
         ["x", "1", "N/A", 2, "3m"]),
        (printers.print_pod_disruption_budget, obj(spec={"maxUnavailable": "50%"}),
         ["x", "N/A", "50%", 0, "3m"]),
        (printers.print_priority_class, obj(value=10, globalDefault=True),
         ["x", 10, True, "3m", ""]),
        (printers.print_network_policy, obj(spec={"podSelector": {}}), ["x", "<none>", "3m"]),
        (printers.print_network_policy,
         obj(spec={"podSelector": {"matchLabels": {"b": "2", "a": "1"}}}),
         ["x", "a=1,b=2", "3m"]),
        (printers.print_validating_webhook, obj(webhooks=[{}, {}]), ["x", 2, "3m"]),
        (printers.print_validating_admission_policy,
         obj(spec={"validations": [{}], "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}),
         ["x", 1, "v1/ConfigMap", "3m"]),
        (printers.print_validating_admission_policy_binding,
         obj(spec={"policyName": "p", "paramRef": {"name": "n"}}), ["x", "p", "*/n", "3m"]),
        (printers.print_validating_admission_policy_binding,
         obj(spec={"policyName": "p"}), ["x", "p", "<unset>", "3m"]),
        (printers.print_role_binding,
         obj(roleRef={"kind": "ClusterRole", "name": "view"}, subjects=[
             {"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"},
             {"kind": "ServiceAccount", "name": "s", "namespace": "n"},
             {"kind": "User", "name": "v"}]),
         ["x", "ClusterRole/view", "3m", "u, v", "g", "n/s"]),
        (printers.print_controller_revision,
         obj(revision=3, metadata={"name": "x", "creationTimestamp": CREATED, "ownerReferences": [
             {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": True}]}),
         ["x", "statefulset.apps/db", 3, "3m"]),
        (printers.print_controller_revision, obj(revision=1), ["x", "<none>", 1, "3m"]),
        (printers.print_stateful_set,
         obj(spec={"replicas": 3, "template": {"spec": {"containers": [
             {"name": "a", "image": "i"}]}}}, status={"readyReplicas": 2}),
         ["x", "2/3", "3m", "a", "i"]),
        (printers.print_daemon_set,
         obj(spec={"selector": {"matchLabels": {"app": "d"}},
                   "template": {"spec": {"nodeSelector": {"os": "linux"}, "containers": []}}},
             status={"desiredNumberScheduled": 2, "numberReady": 1}),
         ["x", 2, 0, 1, 0, 0, "os=linux", "3m", "", "", "app=d"]),
    ],
)  # fmt: skip
def test_cells(printer: Printer, value: Obj, cells: list[Any]) -> None:
    assert printer(value, NOW).cells == cells


@pytest.mark.parametrize(
    ("spec", "status", "deleting", "shown"),
    [
        ({"completions": 3}, {"succeeded": 1}, False, ["Running", "1/3", ""]),
        ({"parallelism": 2}, {}, False, ["Running", "0/1 of 2", ""]),
        ({}, {"startTime": "2026-01-01T11:58:00Z"}, False, ["Running", "0/1", "2m"]),
        ({}, {"startTime": "2026-01-01T11:58:00Z", "completionTime": "2026-01-01T11:58:30Z",
              "conditions": [{"type": "Complete", "status": "True"}]}, False,
         ["Complete", "0/1", "30s"]),
        ({}, {"conditions": [{"type": "Failed", "status": "True"}]}, True, ["Failed", "0/1", ""]),
        ({}, {}, True, ["Terminating", "0/1", ""]),
        ({}, {"conditions": [{"type": "Suspended", "status": "True"}]}, False,
         ["Suspended", "0/1", ""]),
    ],
)  # fmt: skip
def test_job(spec: Obj, status: Obj, deleting: bool, shown: list[str]) -> None:
    job = obj(spec=spec, status=status)
    if deleting:
        job["metadata"]["deletionTimestamp"] = CREATED
    assert printers.print_job(job, NOW).cells[1:4] == shown


@pytest.mark.parametrize(
    ("spec", "status", "shown"),
    [
        ({"type": "ClusterIP", "clusterIPs": ["10.0.0.1"],
          "ports": [{"port": 80, "protocol": "TCP"}], "selector": {"app": "web"}}, {},
         ["ClusterIP", "10.0.0.1", "<none>", "80/TCP", "3m", "app=web"]),
        ({"type": "NodePort", "clusterIPs": ["10.0.0.1"], "externalIPs": ["1.2.3.4"],
          "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]}, {},
         ["NodePort", "10.0.0.1", "1.2.3.4", "80:30080/TCP", "3m", "<none>"]),
        ({"type": "LoadBalancer"}, {}, ["LoadBalancer", "<none>", "<pending>", "<none>", "3m",
                                        "<none>"]),
        ({"type": "LoadBalancer"},
         {"loadBalancer": {"ingress": [{"ip": "5.5.5.5"}, {"hostname": "lb"}, {"ip": "5.5.5.5"}]}},
         ["LoadBalancer", "<none>", "5.5.5.5,lb", "<none>", "3m", "<none>"]),
        ({"type": "ExternalName", "externalName": "example.com"}, {},
         ["ExternalName", "<none>", "example.com", "<none>", "3m", "<none>"]),
    ],
)  # fmt: skip
def test_service(spec: Obj, status: Obj, shown: list[str]) -> None:
    assert printers.print_service(obj(spec=spec, status=status), NOW).cells[1:] == shown


@pytest.mark.parametrize(
    ("event", "shown"),
    [
        ({"type": "Normal", "reason": "Started", "message": " started \n",
          "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
          "source": {"component": "kubelet", "host": "node-a"},
          "firstTimestamp": "2026-01-01T11:58:00Z", "lastTimestamp": "2026-01-01T11:59:00Z",
          "count": 2},
         ["60s", "Normal", "Started", "pod/p", "spec.containers{a}", "kubelet, node-a",
          "started", "2m", 2, "x"]),
        ({"involvedObject": {"kind": "Node"}, "reportingComponent": "ctl",
          "eventTime": "2026-01-01T11:59:30.000000Z"},
         ["30s", "", "", "node", "", "ctl", "", "30s", 1, "x"]),
        ({"involvedObject": {"kind": "Pod", "name": "p"},
          "eventTime": "2026-01-01T11:50:00.000000Z",
          "series": {"count": 5, "lastObservedTime": "2026-01-01T11:59:50.000000Z"}},
         ["10s", "", "", "pod/p", "", "", "", "10m", 5, "x"]),
        ({}, ["<unknown>", "", "", "", "", "", "", "<unknown>", 1, "x"]),
    ],
)  # fmt: skip
def test_event(event: Obj, shown: list[Any]) -> None:
    assert printers.print_event(obj(**event), NOW).cells == shown


@given(st.dictionaries(st.text("abcxyz", min_size=1, max_size=3),
                       st.text("0123", max_size=2), max_size=5))  # fmt: skip
def test_format_labels_sorts_by_key(labels: dict[str, str]) -> None:
    shown = printers.format_labels(labels)
    if not labels:
        assert shown == "<none>"
    else:
        pairs = shown.split(",")
        assert pairs == sorted(pairs, key=lambda pair: pair.split("=", 1)[0])
        assert dict(pair.split("=", 1) for pair in pairs) == labels


def _subset(ips: list[str], ports: list[int]) -> Obj:
    return {"addresses": [{"ip": ip} for ip in ips], "ports": [{"port": p} for p in ports]}


@pytest.mark.parametrize(
    ("subsets", "shown"),
    [
        (None, "<none>"),
        ([{"notReadyAddresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}], ""),
        ([_subset(["10.0.0.1"], [80])], "10.0.0.1:80"),
        ([_subset(["10.0.0.1", "10.0.0.2"], [80, 443])],
         "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."),
        ([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}], "10.0.0.1,fd00::1"),
        ([_subset(["fd00::1"], [80])], "[fd00::1]:80"),
    ],
)  # fmt: skip
def test_endpoints(subsets: list[Obj] | None, shown: str) -> None:
    value = obj() if subsets is None else obj(subsets=subsets)
    assert printers.print_endpoints(value, NOW).cells == ["x", shown, "3m"]


@pytest.mark.parametrize(
    ("ports", "endpoints", "shown"),
    [
        ([], [], ["", ""]),
        ([{"port": 80}, {"name": "h"}, {}], [{"addresses": ["10.0.0.1"]}],
         ["80,h,*", "10.0.0.1"]),
        ([{"port": p} for p in (1, 2, 3, 4, 5)],
         [{"addresses": [f"10.0.0.{i}"]} for i in range(1, 6)],
         ["1,2,3 + 2 more...", "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more..."]),
    ],
)  # fmt: skip
def test_endpoint_slice(ports: list[Obj], endpoints: list[Obj], shown: list[str]) -> None:
    value = obj(addressType="IPv4", ports=ports, endpoints=endpoints)
    assert printers.print_endpoint_slice(value, NOW).cells == ["x", "IPv4", *shown, "3m"]
