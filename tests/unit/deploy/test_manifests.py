"""Structure of the rendered deploy/ manifests: what docs/install.md promises."""

from __future__ import annotations

import functools
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.config import parse_controller_config
from kubesim.apiserver.selectors.labels import LabelSelector, label_selector_from_object
from tests.unit.deploy.rendered import (
    CERT_MANAGER,
    NAMESPACE,
    SELF_SIGNED,
    SERVICE_ACCOUNT,
    Obj,
    Variant,
    by_variant,
    container_port,
    controller_container,
    find,
    literal_env,
    objects,
    one,
)

COMMON_OBJECTS = {
    ("Namespace", NAMESPACE),
    ("ServiceAccount", SERVICE_ACCOUNT),
    ("ClusterRole", "graceful-drain"),
    ("ClusterRoleBinding", "graceful-drain"),
    ("ClusterRole", "graceful-drain-nodes"),
    ("ClusterRoleBinding", "graceful-drain-nodes"),
    ("Role", "graceful-drain-leader-election"),
    ("RoleBinding", "graceful-drain-leader-election"),
    ("Service", "graceful-drain-webhook"),
    ("Deployment", "graceful-drain"),
    ("PodDisruptionBudget", "graceful-drain"),
    ("NetworkPolicy", "graceful-drain"),
    ("ValidatingWebhookConfiguration", "graceful-drain"),
    ("PriorityClass", "graceful-drain-critical"),
    ("ValidatingAdmissionPolicy", "graceful-drain-controller-writes"),
    ("ValidatingAdmissionPolicyBinding", "graceful-drain-controller-writes"),
}
EXPECTED_OBJECTS = {
    SELF_SIGNED.name: COMMON_OBJECTS
    | {
        ("Role", "graceful-drain-self-signed"),
        ("RoleBinding", "graceful-drain-self-signed"),
        ("ClusterRole", "graceful-drain-self-signed"),
        ("ClusterRoleBinding", "graceful-drain-self-signed"),
    },
    CERT_MANAGER.name: COMMON_OBJECTS
    | {
        ("Issuer", "graceful-drain-selfsigned"),
        ("Certificate", "graceful-drain-ca"),
        ("Issuer", "graceful-drain-ca"),
        ("Certificate", "graceful-drain-webhook"),
    },
}
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingWebhookConfiguration",
    "PriorityClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
EXCLUDED_NAMESPACES = {"kube-system", NAMESPACE}
SHUTDOWN_SECONDS = 5  # graceful_drain.controller.app.SHUTDOWN_TIMEOUT_SECONDS (webhook branch)


def _pod_labels(items: list[Obj]) -> dict[str, str]:
    labels: dict[str, str] = one(items, "Deployment")["spec"]["template"]["metadata"]["labels"]
    return labels


def _webhook(items: list[Obj]) -> Obj:
    webhooks = one(items, "ValidatingWebhookConfiguration", "graceful-drain")["webhooks"]
    assert len(webhooks) == 1
    webhook: Obj = webhooks[0]
    return webhook


@by_variant
def test_renders_exactly_the_expected_objects(variant: Variant) -> None:
    items = objects(variant)
    rendered = [(item["kind"], item["metadata"]["name"]) for item in items]
    assert len(rendered) == len(set(rendered))
    assert set(rendered) == EXPECTED_OBJECTS[variant.name]


@by_variant
def test_namespaced_objects_live_in_the_controller_namespace(variant: Variant) -> None:
    for item in objects(variant):
        namespace = item["metadata"].get("namespace")
        if item["kind"] in CLUSTER_SCOPED:
            assert namespace is None, item["kind"]
        else:
            assert namespace == NAMESPACE, (item["kind"], item["metadata"]["name"])


@by_variant
def test_webhook_registration_never_wedges_a_drain(variant: Variant) -> None:
    webhook = _webhook(objects(variant))
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["sideEffects"] == "NoneOnDryRun"
    assert webhook["timeoutSeconds"] == 5
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["matchPolicy"] == "Equivalent"
    assert webhook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods/eviction"],
            "scope": "Namespaced",
        }
    ]
    assert "objectSelector" not in webhook
    assert "caBundle" not in webhook["clientConfig"]  # written by the controller or cainjector


@by_variant
def test_webhook_excludes_kube_system_and_its_own_namespace(variant: Variant) -> None:
    webhook = _webhook(objects(variant))
    assert webhook["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", NAMESPACE],
            }
        ]
    }


_dns_label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
_other_labels = st.dictionaries(
    st.sampled_from(["team", "env", "kubernetes.io/metadata.name-like", "tier"]),
    st.sampled_from(["", "a", "kube-system", NAMESPACE]),
    max_size=3,
)


@functools.cache
def _namespace_selector() -> LabelSelector:
    return label_selector_from_object(_webhook(objects(SELF_SIGNED))["namespaceSelector"])


@given(
    name=st.one_of(_dns_label, st.sampled_from(sorted(EXCLUDED_NAMESPACES))), extra=_other_labels
)
def test_namespace_selector_matches_every_namespace_but_the_excluded(
    name: str, extra: dict[str, str]
) -> None:
    # The API server sets kubernetes.io/metadata.name on every namespace (1.21+).
    selector = _namespace_selector()
    labels = {**extra, "kubernetes.io/metadata.name": name}
    assert selector.matches(labels) == (name not in EXCLUDED_NAMESPACES)


@by_variant
def test_webhook_calls_the_service_that_fronts_the_webhook_port(variant: Variant) -> None:
    items = objects(variant)
    service_ref = _webhook(items)["clientConfig"]["service"]
    assert service_ref["path"] == "/validate-eviction"
    service = one(items, "Service", service_ref["name"])
    assert service["metadata"]["namespace"] == service_ref["namespace"] == NAMESPACE
    https = [port for port in service["spec"]["ports"] if port["port"] == service_ref["port"]]
    assert service_ref["port"] == 443
    assert len(https) == 1
    assert https[0]["targetPort"] == "webhook"
    selector = label_selector_from_object({"matchLabels": service["spec"]["selector"]})
    assert selector.matches(_pod_labels(items))
    container = controller_container(items)
    assert container_port(container, "webhook") == int(
        literal_env(container)["GRACEFUL_DRAIN_WEBHOOK_PORT"]
    )
    assert container_port(container, "metrics") == int(
        literal_env(container)["GRACEFUL_DRAIN_METRICS_PORT"]
    )


@by_variant
def test_two_replicas_behind_their_own_disruption_budget(variant: Variant) -> None:
    items = objects(variant)
    spec = one(items, "Deployment")["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pdb = one(items, "PodDisruptionBudget")["spec"]
    assert label_selector_from_object(pdb["selector"]).matches(_pod_labels(items))
    # One replica at a time may go; the other keeps answering admission requests.
    assert pdb == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": spec["selector"],
    }


@by_variant
def test_pod_runs_restricted(variant: Variant) -> None:
    items = objects(variant)
    pod = one(items, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    for host_field in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(host_field, False)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = controller_container(items)["securityContext"]
    assert context == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert (
        one(items, "Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        == "restricted"
    )


@by_variant
def test_probes_resources_and_shutdown(variant: Variant) -> None:
    items = objects(variant)
    pod = one(items, "Deployment")["spec"]["template"]["spec"]
    container = controller_container(items)
    assert container["image"] == "ghcr.io/stonal/graceful-drain:0.1.0"
    assert container["command"] == ["graceful-drain", "controller"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container_port(container, "metrics") == 8080
    assert container_port(container, "webhook") == 8443
    resources = container["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"memory"}  # no CPU limit: throttling is latency
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > int(pre_stop[1]) + SHUTDOWN_SECONDS


@by_variant
def test_replicas_spread_across_nodes(variant: Variant) -> None:
    items = objects(variant)
    pod = one(items, "Deployment")["spec"]["template"]["spec"]
    labels = _pod_labels(items)
    hostname = [
        constraint
        for constraint in pod["topologySpreadConstraints"]
        if constraint["topologyKey"] == "kubernetes.io/hostname"
    ]
    assert len(hostname) == 1
    assert hostname[0]["maxSkew"] == 1
    assert label_selector_from_object(hostname[0]["labelSelector"]).matches(labels)
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert label_selector_from_object(term["podAffinityTerm"]["labelSelector"]).matches(labels)


@by_variant
def test_configuration_by_graceful_drain_variables(variant: Variant) -> None:
    env = literal_env(controller_container(objects(variant)))
    assert env == {
        "GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": "10m",
        "GRACEFUL_DRAIN_PROTECT": "last-ready",
        "GRACEFUL_DRAIN_WEBHOOK_PORT": "8443",
        "GRACEFUL_DRAIN_METRICS_PORT": "8080",
        "GRACEFUL_DRAIN_LEADER_ELECT": "true",
        "GRACEFUL_DRAIN_LOG_FORMAT": "json",
        "GRACEFUL_DRAIN_LOG_LEVEL": "info",
    }


@by_variant
def test_only_writable_path_is_an_in_memory_tmp(variant: Variant) -> None:
    items = objects(variant)
    pod = one(items, "Deployment")["spec"]["template"]["spec"]
    mounts = {mount["name"]: mount for mount in controller_container(items)["volumeMounts"]}
    assert mounts["tmp"]["mountPath"] == "/tmp"
    for name, mount in mounts.items():
        if name != "tmp":
            assert mount.get("readOnly") is True, name
    tmp = next(volume for volume in pod["volumes"] if volume["name"] == "tmp")
    assert tmp["emptyDir"]["medium"] == "Memory"


def test_self_signed_mode_mounts_only_the_serving_secret_optionally() -> None:
    """The last known certificate for a cold start; never the CA key's Secret."""
    items = objects(SELF_SIGNED)
    container = controller_container(items)
    assert container["args"] == ["--self-signed"]
    pod = one(items, "Deployment")["spec"]["template"]["spec"]
    [volume] = [volume for volume in pod["volumes"] if "secret" in volume]
    assert volume["secret"]["secretName"] == "graceful-drain-webhook-tls"
    assert volume["secret"]["optional"] is True
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    config = parse_controller_config(["--self-signed"], {})
    assert Path(mount["mountPath"]) == config.self_signed_mount
    webhook_configuration = one(items, "ValidatingWebhookConfiguration")
    assert "annotations" not in webhook_configuration["metadata"]


def test_cert_manager_mode_serves_the_certificate_the_cainjector_trusts() -> None:
    items = objects(CERT_MANAGER)
    container = controller_container(items)
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in container["args"])
    assert set(flags) == {"tls-cert-file", "tls-key-file"}
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "tls"]
    assert flags == {
        "tls-cert-file": f"{mount['mountPath']}/tls.crt",
        "tls-key-file": f"{mount['mountPath']}/tls.key",
    }
    pod = one(items, "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    secret_name = volume["secret"]["secretName"]

    annotation = one(items, "ValidatingWebhookConfiguration")["metadata"]["annotations"]
    namespace, certificate_name = annotation["cert-manager.io/inject-ca-from"].split("/")
    assert namespace == NAMESPACE
    serving = one(items, "Certificate", certificate_name)["spec"]
    assert serving["secretName"] == secret_name
    service_ref = _webhook(items)["clientConfig"]["service"]
    # The API server dials <service>.<namespace>.svc and checks that name.
    assert f"{service_ref['name']}.{service_ref['namespace']}.svc" in serving["dnsNames"]
    assert "server auth" in serving["usages"]
    assert not serving.get("isCA", False)

    # The serving certificate comes from a CA Issuer backed by a CA Certificate.
    ca_issuer = one(items, "Issuer", serving["issuerRef"]["name"])
    assert serving["issuerRef"]["kind"] == "Issuer"
    ca_certificate = next(
        c
        for c in find(items, "Certificate")
        if c["spec"]["secretName"] == ca_issuer["spec"]["ca"]["secretName"]
    )
    assert ca_certificate["spec"]["isCA"] is True
    root = one(items, "Issuer", ca_certificate["spec"]["issuerRef"]["name"])
    assert root["spec"] == {"selfSigned": {}}
