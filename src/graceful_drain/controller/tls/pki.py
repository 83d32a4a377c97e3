"""The self-managed CA and serving certificate: issue, read back, judge freshness (pure).

Keys are ECDSA P-256, signatures SHA-256. A certificate is renewed once two thirds of its
lifetime have passed (cert-manager's default renewBefore), so there is always a third of the
lifetime left to roll it out. When the CA itself is renewed, the previous CA stays in the
published bundle while it is valid, so serving certificates it signed keep verifying until
every replica has moved on.

Two Secrets keep them, so the pod can mount the serving pair without the CA key:
- the serving Secret (type kubernetes.io/tls): `tls.crt`, `tls.key`, `ca.crt` (the bundle:
  current CA first, as it was when the serving certificate was issued);
- the CA Secret (type Opaque): `ca.crt` (the bundle) and `ca.key` (the current CA's key).
A serving Secret written by an older release also holds `ca.key`; it is read as the CA when
no CA Secret exists yet, and dropped from the serving Secret at its next write.
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY = timedelta(days=3650)
SERVING_VALIDITY = timedelta(days=365)
RENEW_AT_FRACTION = 2 / 3
MAX_BACKDATE = timedelta(minutes=5)  # tolerate clocks behind ours (kube-apiserver's)
CA_COMMON_NAME = "graceful-drain-ca"
# The serving certificate's subject: fixed and short. The names the API server dials are in
# the subjectAltName (clients ignore the Common Name when it is present); a Common Name is
# at most 64 characters (RFC 5280), and `<service>.<namespace>.svc` can be 131, so taking
# it from the names would refuse long release or namespace names.
SERVING_COMMON_NAME = "graceful-drain-webhook"

TLS_CERT_KEY = "tls.crt"
TLS_KEY_KEY = "tls.key"
CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"


@dataclass(frozen=True, slots=True)
class CertificateBundle:
    ca_bundle_pem: bytes  # current CA, then the previous one while it is still valid
    ca_key_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def serving_secret_data(self) -> dict[str, str]:
        """The serving Secret's `data` (base64 values): no CA key."""
        return {
            TLS_CERT_KEY: _b64(self.cert_pem),
            TLS_KEY_KEY: _b64(self.key_pem),
            CA_CERT_KEY: _b64(self.ca_bundle_pem),
        }

    def ca_secret_data(self) -> dict[str, str]:
        """The CA Secret's `data` (base64 values)."""
        return {CA_CERT_KEY: _b64(self.ca_bundle_pem), CA_KEY_KEY: _b64(self.ca_key_pem)}

    @property
    def ca_bundle_b64(self) -> str:
        """The caBundle value of a webhook clientConfig."""
        return _b64(self.ca_bundle_pem)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _validity(now: datetime, lifetime: timedelta) -> tuple[datetime, datetime]:
    backdate = min(MAX_BACKDATE, lifetime / 10)
    return now - backdate, now + lifetime


def _key_usage(*, key_cert_sign: bool = False, crl_sign: bool = False) -> x509.KeyUsage:
    """digitalSignature (what ECDSA TLS needs), plus certificate signing for a CA."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _general_name(host: str) -> x509.GeneralName:
    """An IP address SAN for an IP literal, a DNS name SAN for anything else."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def service_dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """The names the API server may use to reach the webhook Service."""
    return (
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    )


def new_ca(now: datetime, lifetime: timedelta = CA_VALIDITY) -> tuple[bytes, bytes]:
    """A self-signed CA: (certificate PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_COMMON_NAME)])
    not_before, not_after = _validity(now, lifetime)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _pem(cert), _pem_key(key)


def new_serving(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    dns_names: tuple[str, ...],
    now: datetime,
    lifetime: timedelta = SERVING_VALIDITY,
) -> tuple[bytes, bytes]:
    """A serving certificate for `dns_names` (IP literals become IP address names) signed by
    the CA: (certificate PEM, key PEM). The subject is SERVING_COMMON_NAME whatever the
    names' length; only the subjectAltName carries them."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    not_before, not_after = _validity(now, lifetime)
    # A serving certificate must not outlive its CA.
    not_after = min(not_after, ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVING_COMMON_NAME)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([_general_name(name) for name in dns_names]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return _pem(cert), _pem_key(key)


def renew_at(cert: x509.Certificate) -> datetime:
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * RENEW_AT_FRACTION


# --- reading a Secret back, and judging it ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fresh:
    """Use it as it is; look again at `renew_at`."""

    renew_at: datetime


@dataclass(frozen=True, slots=True)
class NeedsServing:
    """The CA is good; issue a new serving certificate."""

    why: str


@dataclass(frozen=True, slots=True)
class NeedsCA:
    """Start over with a new CA (keeping the old CA certificate in the bundle while valid)."""

    why: str


Assessment = Fresh | NeedsServing | NeedsCA


def _decoded(data: dict[str, str] | None, keys: tuple[str, ...]) -> dict[str, bytes] | None:
    if not data:
        return None
    try:
        return {key: base64.b64decode(data[key], validate=True) for key in keys}
    except (KeyError, ValueError):
        return None


def bundle_from_secrets(
    ca_data: dict[str, str] | None, serving_data: dict[str, str] | None
) -> CertificateBundle | None:
    """The bundle the two Secrets' `data` hold; None without a CA (and its key) in either.
    A missing or partial serving pair reads as empty (assess: NeedsServing)."""
    ca = _decoded(ca_data, (CA_CERT_KEY, CA_KEY_KEY)) or _decoded(
        serving_data, (CA_CERT_KEY, CA_KEY_KEY)
    )  # the CA Secret, else an older release's single Secret
    if ca is None:
        return None
    serving = _decoded(serving_data, (TLS_CERT_KEY, TLS_KEY_KEY)) or {
        TLS_CERT_KEY: b"", TLS_KEY_KEY: b"",
    }  # fmt: skip
    return CertificateBundle(
        ca[CA_CERT_KEY], ca[CA_KEY_KEY], serving[TLS_CERT_KEY], serving[TLS_KEY_KEY]
    )


def served_bundle_from_files(directory: Path) -> CertificateBundle | None:
    """The serving Secret as the kubelet mounts it (tls.crt, tls.key, ca.crt), without the
    CA key: enough to serve, not to issue. None if a file is missing."""
    try:
        cert, key, cas = (
            (directory / name).read_bytes() for name in (TLS_CERT_KEY, TLS_KEY_KEY, CA_CERT_KEY)
        )
    except OSError:
        return None
    return CertificateBundle(cas, b"", cert, key)


# --- which CAs the webhook configuration must trust ----------------------------------------


def certificates(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle; [] if it does not parse."""
    try:
        return x509.load_pem_x509_certificates(pem) if pem.strip() else []
    except ValueError:
        return []


def fingerprint(cert: x509.Certificate) -> bytes:
    return cert.fingerprint(hashes.SHA256())


def issuer_in(cert_pem: bytes, bundle_pem: bytes) -> x509.Certificate | None:
    """The CA of `bundle_pem` that signed the (first) certificate of `cert_pem`, if any."""
    served = certificates(cert_pem)
    if not served:
        return None
    for ca in certificates(bundle_pem):
        try:
            served[0].verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return ca
    return None


def merged_bundle(
    present_pem: bytes,
    required: list[x509.Certificate],
    removable: set[bytes],
    now: datetime,
) -> bytes:
    """What a caBundle should hold: every `required` CA (in that order), then the CAs already
    present that are neither removable (by fingerprint) nor expired."""
    kept: dict[bytes, x509.Certificate] = {}
    for ca in required:
        kept.setdefault(fingerprint(ca), ca)
    for ca in certificates(present_pem):
        key = fingerprint(ca)
        if key not in removable and ca.not_valid_after_utc > now:
            kept.setdefault(key, ca)
    return b"".join(_pem(ca) for ca in kept.values())


def same_certificates(first_pem: bytes, second_pem: bytes) -> bool:
    return {fingerprint(c) for c in certificates(first_pem)} == {
        fingerprint(c) for c in certificates(second_pem)
    }


def _same_public_key(key_pem: bytes, cert: x509.Certificate) -> bool:
    key = serialization.load_pem_private_key(key_pem, password=None)
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    return key.public_key().public_bytes(der, spki) == cert.public_key().public_bytes(der, spki)


def assess(
    bundle: CertificateBundle | None, dns_names: tuple[str, ...], now: datetime
) -> Assessment:
    if bundle is None:
        return NeedsCA("no certificates stored yet")
    try:
        cas = x509.load_pem_x509_certificates(bundle.ca_bundle_pem)
        ca = cas[0]
        constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
        if not constraints.ca or not _same_public_key(bundle.ca_key_pem, ca):
            return NeedsCA("the stored CA is not a CA matching its key")
    except (ValueError, TypeError, x509.ExtensionNotFound):
        return NeedsCA("the stored CA does not parse")
    if now >= renew_at(ca):
        return NeedsCA("the CA is two thirds through its lifetime")
    try:
        cert = x509.load_pem_x509_certificate(bundle.cert_pem)
        cert.verify_directly_issued_by(ca)
        if not _same_public_key(bundle.key_pem, cert):
            return NeedsServing("the serving key does not match its certificate")
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return NeedsServing("the serving certificate does not parse or is not from the CA")
    named = {*names.get_values_for_type(x509.DNSName),
             *(str(ip) for ip in names.get_values_for_type(x509.IPAddress))}  # fmt: skip
    if not set(dns_names) <= named:
        return NeedsServing("the serving certificate does not name the webhook Service")
    if now < cert.not_valid_before_utc:
        return NeedsServing("the serving certificate is not valid yet")
    if now >= renew_at(cert):
        return NeedsServing("the serving certificate is two thirds through its lifetime")
    return Fresh(min(renew_at(cert), renew_at(ca)))


def renewed(
    bundle: CertificateBundle | None,
    assessment: NeedsServing | NeedsCA,
    dns_names: tuple[str, ...],
    now: datetime,
    *,
    ca_lifetime: timedelta = CA_VALIDITY,
    serving_lifetime: timedelta = SERVING_VALIDITY,
) -> CertificateBundle:
    """What to store instead of `bundle`."""
    if isinstance(assessment, NeedsServing) and bundle is not None:
        ca_bundle_pem, ca_key_pem = bundle.ca_bundle_pem, bundle.ca_key_pem
        current_ca = _pem(x509.load_pem_x509_certificates(ca_bundle_pem)[0])
    else:
        current_ca, ca_key_pem = new_ca(now, ca_lifetime)
        ca_bundle_pem = current_ca + _still_valid_cas(bundle, now)
    cert_pem, key_pem = new_serving(current_ca, ca_key_pem, dns_names, now, serving_lifetime)
    return CertificateBundle(ca_bundle_pem, ca_key_pem, cert_pem, key_pem)


def _still_valid_cas(bundle: CertificateBundle | None, now: datetime) -> bytes:
    """The previous bundle's first (current) CA, if it parses and has not expired."""
    if bundle is None:
        return b""
    try:
        previous = x509.load_pem_x509_certificates(bundle.ca_bundle_pem)[0]
    except ValueError:
        return b""
    return _pem(previous) if previous.not_valid_after_utc > now else b""
