"""The self-managed CA: issuing, reading a Secret back, and when to renew what."""

from __future__ import annotations

import socket
import ssl
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st

from graceful_drain.controller.tls.pki import (
    SERVING_COMMON_NAME,
    CertificateBundle,
    Fresh,
    NeedsCA,
    NeedsServing,
    assess,
    bundle_from_secrets,
    certificates,
    fingerprint,
    issuer_in,
    merged_bundle,
    renewed,
    same_certificates,
    service_dns_names,
)

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
NAMES = service_dns_names("graceful-drain", "graceful-drain")
CA_LIFE = timedelta(days=30)
SERVING_LIFE = timedelta(days=3)


def issue(now: datetime = NOW, names: tuple[str, ...] = NAMES) -> CertificateBundle:
    return renewed(
        None, NeedsCA("test"), names, now, ca_lifetime=CA_LIFE, serving_lifetime=SERVING_LIFE
    )


def cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def cas(bundle: CertificateBundle) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle.ca_bundle_pem)


BUNDLE = issue()
SERVING_RENEWAL = NOW + SERVING_LIFE * 2 / 3  # backdating moves it a little earlier


def test_service_names_cover_what_the_api_server_dials() -> None:
    assert NAMES[0] == "graceful-drain.graceful-drain.svc"
    assert "graceful-drain.graceful-drain.svc.cluster.local" in NAMES


def test_issued_serving_certificate_is_signed_by_the_ca_for_the_service_names() -> None:
    serving, (ca,) = cert(BUNDLE.cert_pem), cas(BUNDLE)

    serving.verify_directly_issued_by(ca)
    san = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == list(NAMES)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not serving.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert serving.not_valid_before_utc <= NOW < serving.not_valid_after_utc


def test_the_two_secrets_round_trip_and_only_the_ca_secret_holds_the_ca_key() -> None:
    serving, ca = BUNDLE.serving_secret_data(), BUNDLE.ca_secret_data()
    assert set(serving) == {"tls.crt", "tls.key", "ca.crt"}
    assert set(ca) == {"ca.crt", "ca.key"}
    assert bundle_from_secrets(ca, serving) == BUNDLE


def test_an_older_single_secret_still_reads_as_the_ca() -> None:
    legacy = {**BUNDLE.serving_secret_data(), "ca.key": BUNDLE.ca_secret_data()["ca.key"]}
    assert bundle_from_secrets(None, legacy) == BUNDLE


def test_a_ca_without_a_serving_pair_needs_a_serving_certificate() -> None:
    bundle = bundle_from_secrets(BUNDLE.ca_secret_data(), None)
    assert bundle is not None and bundle.cert_pem == b""
    assert isinstance(assess(bundle, NAMES, NOW), NeedsServing)


@pytest.mark.parametrize(
    "data",
    [None, {}, {"tls.crt": "eA=="}, {**BUNDLE.ca_secret_data(), "ca.key": "not base64!"}],
    ids=["none", "empty", "partial", "bad-base64"],
)
def test_no_usable_ca_reads_as_nothing(data: dict[str, str] | None) -> None:
    assert bundle_from_secrets(data, None) is None


def test_merged_bundle_adds_the_required_and_drops_the_removable_and_expired() -> None:
    old, new, stale = issue(), issue(), issue(NOW - CA_LIFE * 2)
    present = old.ca_bundle_pem + stale.ca_bundle_pem
    [new_ca], [old_ca] = cas(new), cas(old)
    merged = merged_bundle(present, [new_ca], set(), NOW)
    assert [fingerprint(c) for c in certificates(merged)] == [
        fingerprint(new_ca),
        fingerprint(old_ca),
    ]  # the expired one is gone, the old one kept until retired
    retired = merged_bundle(present, [new_ca], {fingerprint(old_ca)}, NOW)
    assert same_certificates(retired, new.ca_bundle_pem)
    assert issuer_in(old.cert_pem, merged) is not None
    assert issuer_in(old.cert_pem, retired) is None
    assert issuer_in(old.cert_pem, b"not a pem") is None


def test_fresh_bundle_is_used_until_two_thirds_of_the_serving_lifetime() -> None:
    verdict = assess(BUNDLE, NAMES, NOW + timedelta(days=1))

    assert isinstance(verdict, Fresh)
    assert NOW < verdict.renew_at <= SERVING_RENEWAL


@pytest.mark.parametrize(
    ("bundle", "names", "now", "expected"),
    [
        (None, NAMES, NOW, NeedsCA),
        (BUNDLE, NAMES, SERVING_RENEWAL, NeedsServing),
        (BUNDLE, NAMES, NOW + CA_LIFE * 2 / 3, NeedsCA),
        (BUNDLE, (*NAMES, "other.svc"), NOW, NeedsServing),
        (replace(BUNDLE, key_pem=issue().key_pem), NAMES, NOW, NeedsServing),
        (replace(BUNDLE, cert_pem=issue().cert_pem), NAMES, NOW, NeedsServing),
        (replace(BUNDLE, ca_key_pem=issue().ca_key_pem), NAMES, NOW, NeedsCA),
        (replace(BUNDLE, ca_bundle_pem=b"garbage"), NAMES, NOW, NeedsCA),
        (replace(BUNDLE, ca_bundle_pem=BUNDLE.cert_pem), NAMES, NOW, NeedsCA),
        (replace(BUNDLE, cert_pem=b"garbage"), NAMES, NOW, NeedsServing),
        (BUNDLE, NAMES, NOW - timedelta(days=1), NeedsServing),
    ],
    ids=[
        "nothing stored",
        "serving due",
        "CA due",
        "other service names",
        "serving key mismatch",
        "serving cert from another CA",
        "CA key mismatch",
        "CA garbage",
        "CA is not a CA",
        "serving garbage",
        "serving not valid yet",
    ],
)
def test_assess(
    bundle: CertificateBundle | None, names: tuple[str, ...], now: datetime, expected: type
) -> None:
    assert isinstance(assess(bundle, names, now), expected)


def test_serving_renewal_keeps_the_ca() -> None:
    later = SERVING_RENEWAL
    new = renewed(BUNDLE, NeedsServing("due"), NAMES, later, serving_lifetime=SERVING_LIFE)

    assert new.ca_bundle_pem == BUNDLE.ca_bundle_pem and new.ca_key_pem == BUNDLE.ca_key_pem
    assert new.cert_pem != BUNDLE.cert_pem
    assert isinstance(assess(new, NAMES, later), Fresh)


def test_ca_renewal_keeps_the_previous_ca_in_the_bundle_while_it_is_valid() -> None:
    later = NOW + CA_LIFE * 2 / 3
    new = renewed(BUNDLE, NeedsCA("due"), NAMES, later, ca_lifetime=CA_LIFE)
    current, previous = cas(new)

    assert previous == cas(BUNDLE)[0]
    cert(new.cert_pem).verify_directly_issued_by(current)
    assert isinstance(assess(new, NAMES, later), Fresh)

    expired = renewed(BUNDLE, NeedsCA("due"), NAMES, NOW + CA_LIFE * 2, ca_lifetime=CA_LIFE)
    assert len(cas(expired)) == 1


def test_serving_certificate_never_outlives_its_ca() -> None:
    short_ca = renewed(
        None, NeedsCA("x"), NAMES, NOW, ca_lifetime=timedelta(days=1),
        serving_lifetime=timedelta(days=365),
    )  # fmt: skip

    assert cert(short_ca.cert_pem).not_valid_after_utc <= cas(short_ca)[0].not_valid_after_utc


def test_extra_hosts_become_ip_and_dns_names_and_are_assessed() -> None:
    hosts = (*NAMES, "127.0.0.1", "webhook.example.internal")
    bundle = issue(names=hosts)
    sans = cert(bundle.cert_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert [str(ip) for ip in sans.value.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert "webhook.example.internal" in sans.value.get_values_for_type(x509.DNSName)
    assert isinstance(assess(bundle, hosts, NOW), Fresh)
    # A certificate issued before the IP was configured must be re-issued.
    assert isinstance(assess(issue(), hosts, NOW), NeedsServing)


# --- names of any length Kubernetes allows -----------------------------------------------

# A Service name and a namespace are DNS labels: at most 63 characters each.
LABEL = st.from_regex(r"\A[a-z]([a-z0-9-]{0,61}[a-z0-9])?\Z")


def long_label(length: int, stem: str) -> str:
    return (stem * length)[: length - 1] + "x"


@pytest.mark.parametrize(
    ("service", "namespace"),
    [
        ("graceful-drain", "graceful-drain"),
        # The issue's report: two 27-character names, a 67-character `<svc>.<ns>.svc`.
        (long_label(27, "release-"), long_label(27, "namespace-")),
        # A 53-character release's Service (the chart's 63-character cap) in a 63-character
        # namespace: the longest names the chart can render.
        (long_label(63, "r" * 53 + "-graceful-drain"), long_label(63, "ns-")),
    ],
)
def test_a_certificate_is_issued_for_names_of_any_length_a_label_allows(
    service: str, namespace: str
) -> None:
    names = service_dns_names(service, namespace)
    bundle = issue(names=names)
    serving = cert(bundle.cert_pem)

    assert serving.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == (
        SERVING_COMMON_NAME
    )
    san = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == list(names)
    assert isinstance(assess(bundle, names, NOW), Fresh)


@settings(max_examples=25, deadline=None)
@given(service=LABEL, namespace=LABEL)
def test_the_subject_never_depends_on_the_names(service: str, namespace: str) -> None:
    names = service_dns_names(service, namespace)
    bundle = issue(names=names)
    assert cert(bundle.cert_pem).subject == cert(BUNDLE.cert_pem).subject
    assert isinstance(assess(bundle, names, NOW), Fresh)


def test_a_tls_client_verifies_the_longest_name_through_the_subject_alt_name(
    tmp_path: Path,
) -> None:
    """A real handshake over loopback: OpenSSL's hostname check on a 131-character name."""
    service, namespace = "s" * 63, "n" * 63
    names = service_dns_names(service, namespace)
    bundle = issue(now=datetime.now(UTC), names=names)
    (tmp_path / "tls.crt").write_bytes(bundle.cert_pem)
    (tmp_path / "tls.key").write_bytes(bundle.key_pem)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_context = ssl.create_default_context(cadata=bundle.ca_bundle_pem.decode())

    def handshake(server_hostname: str) -> None:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            listener.settimeout(10)
            port = listener.getsockname()[1]

            def serve() -> None:
                try:
                    connection, _ = listener.accept()
                    with server_context.wrap_socket(connection, server_side=True):
                        pass
                except OSError:  # the client refused us (ssl.SSLError is an OSError)
                    return

            server = threading.Thread(target=serve)
            server.start()
            try:
                with (
                    socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
                    client_context.wrap_socket(raw, server_hostname=server_hostname),
                ):
                    pass
            finally:
                server.join(timeout=10)

    handshake(names[0])
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(f"other.{namespace}.svc")
