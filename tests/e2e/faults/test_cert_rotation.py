"""The fault suite's certificate-file row: the cert-manager mode (--tls-cert-file and
--tls-key-file, the CA in the webhook configuration's caBundle, as cert-manager's cainjector
writes it) while the serving certificate is renewed on disk — same CA, new key — as
cert-manager does a third of the way before expiry."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import ssl
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509

from kubesim.pki import CertificateAuthority, KeyPair
from kubesim.sim import KubeSim
from tests.e2e.controller.drain_cluster import DrainCluster, drain_cluster
from tests.e2e.controller.installed import DEPLOY
from tests.e2e.faults.suite import Context, Fault, run_fault

pytestmark = pytest.mark.e2e

SERVICE_NAMES = [
    "graceful-drain-webhook.graceful-drain.svc",
    "graceful-drain-webhook.graceful-drain.svc.cluster.local",
]
RELOAD = "200ms"  # --tls-reload-interval, scaled from the 10 s default


def issue(ca: CertificateAuthority, directory: Path) -> KeyPair:
    pair = ca.issue_server(SERVICE_NAMES)
    # Written to a side file then moved in, as the kubelet swaps a Secret volume's files.
    for name, data in (("tls.key", pair.key_pem), ("tls.crt", pair.cert_pem)):
        staged = directory / f".{name}.new"
        staged.write_bytes(data)
        os.replace(staged, directory / name)
    return pair


def files_mode(directory: Path, tls: Path, ca_pem: bytes) -> Path:
    """deploy/base in the files mode, its caBundle set as cert-manager's cainjector would."""
    directory.mkdir(parents=True, exist_ok=True)
    bundle = base64.b64encode(ca_pem).decode()
    (directory / "kustomization.yaml").write_text(
        textwrap.dedent(f"""\
        apiVersion: kustomize.config.k8s.io/v1beta1
        kind: Kustomization
        resources:
          - {os.path.relpath(DEPLOY / "base", directory)}
        patches:
          - target: {{group: apps, version: v1, kind: Deployment, name: graceful-drain}}
            patch: |-
              - op: add
                path: /spec/template/spec/containers/0/args
                value: ["--tls-cert-file={tls / "tls.crt"}", "--tls-key-file={tls / "tls.key"}",
                        "--tls-reload-interval={RELOAD}"]
          - target: {{kind: ValidatingWebhookConfiguration, name: graceful-drain}}
            patch: |-
              - op: add
                path: /webhooks/0/clientConfig/caBundle
                value: {bundle}
        """)
    )
    return directory


def served_serial(port: int, ca_pem: bytes) -> int:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.check_hostname = False
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


@dataclass
class FilesMode:
    cluster: DrainCluster
    ca: CertificateAuthority
    tls: Path


@pytest.fixture
async def files(sim: KubeSim, tmp_path: Path) -> AsyncIterator[FilesMode]:
    ca = CertificateAuthority("cert-manager-issuer")
    tls = tmp_path / "tls"
    tls.mkdir()
    issue(ca, tls)
    kustomization = files_mode(tmp_path / "overlay", tls, ca.cert_pem)
    async with drain_cluster(sim, tmp_path, kustomization=kustomization) as running:
        yield FilesMode(running, ca, tls)


async def test_serving_certificate_files_renewed(files: FilesMode) -> None:
    async def inject(context: Context) -> None:
        renewed = await asyncio.to_thread(issue, files.ca, files.tls)
        context.state["serial"] = x509.load_pem_x509_certificate(renewed.cert_pem).serial_number

    async def recovered(context: Context) -> None:
        port = context.replicas[0].webhook_port
        while True:  # the handshake is the only way to see what is served
            serial = await asyncio.to_thread(served_serial, port, files.ca.cert_pem)
            if serial == context.state["serial"]:
                return
            await asyncio.sleep(0.05)

    row = await run_fault(files.cluster, Fault(
        "serving certificate files renewed (cert-manager mode, same CA)", inject,
        recovered=recovered, bound=5.0,
        note=f"reloaded within --tls-reload-interval ({RELOAD}, scaled from 10 s)",
    ))  # fmt: skip
    assert row.survived, row
    assert row.wrongly_allowed_during == row.wrongly_allowed_after == 0, row
