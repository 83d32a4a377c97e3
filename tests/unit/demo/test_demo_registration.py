"""The demo registers its webhook exactly as deploy/ does, and its certificate fits the Service."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml
from cryptography import x509

from graceful_drain.demo.registration import (
    CONTROLLER_NAMESPACE,
    SERVICE,
    SERVICE_PORT,
    issue_webhook_tls,
    webhook_configuration,
)

REPO = Path(__file__).resolve().parents[3]


def test_the_configuration_is_deploys_own() -> None:
    shipped = yaml.safe_load((REPO / "deploy" / "base" / "webhook.yaml").read_text())
    assert webhook_configuration() == shipped


def test_the_service_and_port_are_deploys_own() -> None:
    service = yaml.safe_load((REPO / "deploy" / "base" / "service.yaml").read_text())
    assert (service["metadata"]["name"], service["metadata"]["namespace"]) == (
        SERVICE, CONTROLLER_NAMESPACE,
    )  # fmt: skip
    assert SERVICE_PORT in [port["port"] for port in service["spec"]["ports"]]


def test_the_ca_bundle_goes_into_every_webhook(tmp_path: Path) -> None:
    tls = issue_webhook_tls(tmp_path)
    configuration = webhook_configuration(tls.ca_pem)
    bundles = [hook["clientConfig"]["caBundle"] for hook in configuration["webhooks"]]
    assert bundles == [base64.b64encode(tls.ca_pem).decode()]
    assert "caBundle" not in webhook_configuration()["webhooks"][0]["clientConfig"]


def test_the_serving_certificate_names_the_service_as_the_api_server_calls_it(
    tmp_path: Path,
) -> None:
    tls = issue_webhook_tls(tmp_path)
    cert = x509.load_pem_x509_certificate(tls.cert_file.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{SERVICE}.{CONTROLLER_NAMESPACE}.svc" in names.get_values_for_type(x509.DNSName)
    assert tls.key_file.stat().st_mode & 0o777 == 0o600
