"""The longest names Helm and Kubernetes allow render objects the API server accepts and a
controller configuration that parses: a 53-character release (Helm's limit) in a
63-character namespace (a DNS label), in every TLS mode.

What limits a name: a Service name is a DNS label (63), label values are at most 63, a
certificate's Common Name at most 64 (RFC 5280), other object names DNS subdomains (253).
The real API server's verdict is tests/e2e/real_control_plane/test_long_names_real.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from graceful_drain.config import POD_NAMESPACE_VARIABLE, parse_controller_config
from graceful_drain.kube.names import is_dns_label, is_dns_subdomain
from tests.unit.chart.rendered import TLS_MODES, Obj, mode_values, template
from tests.unit.chart.test_chart import EVERYTHING_ON, by_kind, container

RELEASE_53 = ("long-release-" * 5)[:52] + "x"
NAMESPACE_63 = ("a-namespace-" * 6)[:62] + "x"
# apimachinery's IsValidLabelValue.
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
COMMON_NAME_MAX = 64


def test_the_names_are_as_long_as_allowed() -> None:
    assert len(RELEASE_53) == 53 and is_dns_label(RELEASE_53)
    assert len(NAMESPACE_63) == 63 and is_dns_label(NAMESPACE_63)


def label_maps(item: Obj) -> Iterator[dict[str, str]]:
    """Every label map of an object: its own, its pod template's, its selectors'."""
    yield item["metadata"].get("labels") or {}
    spec = item.get("spec") or {}
    yield (spec.get("template") or {}).get("metadata", {}).get("labels") or {}
    selector = spec.get("selector") or {}
    yield selector.get("matchLabels", selector if item["kind"] == "Service" else {}) or {}


def rendered(mode: str, extra: Obj | None = None) -> list[Obj]:
    values = mode_values(mode) | EVERYTHING_ON | (extra or {})
    return template(values, release=RELEASE_53, namespace=NAMESPACE_63)


@pytest.mark.parametrize("mode", TLS_MODES)
@pytest.mark.parametrize(
    "extra", [{}, {"nameOverride": "n" * 63}, {"fullnameOverride": "f" * 70}], ids=str
)
def test_every_name_and_label_fits_its_limit(mode: str, extra: Obj) -> None:
    items = rendered(mode, extra)
    for item in items:
        name = item["metadata"]["name"]
        assert is_dns_subdomain(name), (item["kind"], name)
        for labels in label_maps(item):
            for key, value in labels.items():
                assert len(value) <= 63 and LABEL_VALUE.fullmatch(value), (item["kind"], key)
    [service] = by_kind(items, "Service")
    assert is_dns_label(service["metadata"]["name"]), service["metadata"]["name"]
    [configuration] = by_kind(items, "ValidatingWebhookConfiguration")
    assert configuration["webhooks"][0]["clientConfig"]["service"] == {
        "name": service["metadata"]["name"], "namespace": NAMESPACE_63,
        "path": "/validate-eviction", "port": 443,
    }  # fmt: skip
    for certificate in by_kind(items, "Certificate"):
        assert len(certificate["spec"].get("commonName", "")) <= COMMON_NAME_MAX
        for dns_name in certificate["spec"].get("dnsNames", []):
            assert all(is_dns_label(part) for part in dns_name.split(".")), dns_name


@pytest.mark.parametrize("mode", TLS_MODES)
def test_the_controller_accepts_the_names_the_chart_gives_it(mode: str) -> None:
    """The env the chart sets parses (the Service name is checked as a DNS label, the Lease,
    Secret and webhook configuration names as subdomains) and names the rendered objects."""
    items = rendered(mode)
    controller = container(items)
    env = {v["name"]: v["value"] for v in controller["env"] if "value" in v}
    env[POD_NAMESPACE_VARIABLE] = NAMESPACE_63
    config = parse_controller_config(controller["args"], env)

    [service] = by_kind(items, "Service")
    [configuration] = by_kind(items, "ValidatingWebhookConfiguration")
    assert config.service_name == service["metadata"]["name"]
    assert config.webhook_configuration == configuration["metadata"]["name"]
    assert config.controller_namespace == NAMESPACE_63
    role_names = {
        name for role in by_kind(items, "Role") for rule in role["rules"]
        for name in rule.get("resourceNames", [])
    }  # fmt: skip
    assert config.lease_name in role_names
    if mode == "self-signed":
        assert config.self_signed_secret in role_names
