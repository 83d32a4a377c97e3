"""graceful-drain for part 3: the controller process, and its webhook registered in kubesim
or on the real control plane.

The controller runs as it does in a cluster: its own process (spawned), `ControllerApp` with
the webhook, the informer cache and the reconciler, talking to kubesim over HTTPS. Its
serving certificate comes from a throwaway CA; `install` creates the shipped
ValidatingWebhookConfiguration (deploy/base/webhook.yaml) with that CA's bundle and resolves
its Service to the controller's port; `uninstall` deletes it again. On the real control plane,
which cannot reach a Service, `register_by_url` creates the same configuration with
`clientConfig.url` naming the controller's loopback port instead (its certificate names
127.0.0.1), and `unregister` deletes it.
"""

from __future__ import annotations

import asyncio
import base64
import os
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path

import yaml

from bench.procs import receive_async, run_child
from graceful_drain.controller.app import ControllerApp
from graceful_drain.controller.settings import ControllerConfig
from graceful_drain.logs import configure_logging
from kubesim.client import KubeClient, resource_path
from kubesim.pki import CertificateAuthority
from kubesim.sim import KubeSim

WEBHOOK_MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "base" / "webhook.yaml"
NAMESPACE = "graceful-drain"
SERVICE = "graceful-drain-webhook"
SYNC_TIMEOUT = 60.0
WEBHOOK_CONFIGURATION = "graceful-drain"  # deploy/base/webhook.yaml's name
WEBHOOK_CONFIGURATIONS = resource_path(
    "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"
)


@dataclass(frozen=True)
class ControllerOptions:
    kubeconfig: str
    rollout_timeout: float  # seconds
    uvloop: bool = True
    # Where the controller's JSON log goes, at info (one line per admission, with where its
    # time went); None: warnings only, to nowhere.
    log_file: str | None = None


@dataclass(frozen=True)
class ControllerReady:
    port: int
    ca_pem: bytes
    metrics_port: int = 0


def webhook_configuration(ca_pem: bytes) -> dict[str, object]:
    manifest: dict[str, object] = yaml.safe_load(WEBHOOK_MANIFEST.read_text(encoding="utf-8"))
    for hook in manifest["webhooks"]:  # type: ignore[attr-defined]
        hook["clientConfig"]["caBundle"] = base64.b64encode(ca_pem).decode()
    return manifest


def webhook_configuration_by_url(ready: ControllerReady) -> dict[str, object]:
    """The shipped configuration, each webhook's Service replaced by the controller's URL."""
    manifest = webhook_configuration(ready.ca_pem)
    for hook in manifest["webhooks"]:  # type: ignore[attr-defined]
        service = hook["clientConfig"].pop("service")
        hook["clientConfig"]["url"] = f"https://127.0.0.1:{ready.port}{service['path']}"
    return manifest


async def register_by_url(api: KubeClient, ready: ControllerReady) -> None:
    await api.create(WEBHOOK_CONFIGURATIONS, webhook_configuration_by_url(ready))


async def unregister(api: KubeClient) -> None:
    await api.delete(f"{WEBHOOK_CONFIGURATIONS}/{WEBHOOK_CONFIGURATION}")


def install(sim: KubeSim, ready: ControllerReady) -> None:
    manifest = webhook_configuration(ready.ca_pem)
    for hook in manifest["webhooks"]:  # type: ignore[attr-defined]
        service = hook["clientConfig"]["service"]
        sim.webhook_services.register(
            service["namespace"], service["name"], service.get("port", 443), "127.0.0.1",
            ready.port,
        )  # fmt: skip
    sim.create(manifest)


def uninstall(sim: KubeSim) -> None:
    rt = sim.resources.by_kind("admissionregistration.k8s.io", "ValidatingWebhookConfiguration")
    assert rt is not None
    sim.registry.delete(rt, "", WEBHOOK_CONFIGURATION, {})


async def _serve(connection: Connection, options: ControllerOptions) -> None:
    ca = CertificateAuthority("graceful-drain-bench")
    pair = ca.issue_server(["127.0.0.1", f"{SERVICE}.{NAMESPACE}.svc"])
    with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        config = ControllerConfig(
            rollout_timeout=timedelta(seconds=options.rollout_timeout),
            bind_address="127.0.0.1",
            webhook_port=0,
            metrics_port=0,
            tls_cert_file=cert,
            tls_key_file=key,
            kubeconfig=Path(options.kubeconfig),
            controller_namespace=NAMESPACE,
        )
        app = ControllerApp(config, identity="graceful-drain-bench")
        await app.start()
        try:
            async with asyncio.timeout(SYNC_TIMEOUT):
                await app.cache.wait_synced()
            connection.send(
                ControllerReady(app.webhook_site.port, ca.cert_pem, app.health_site.port)
            )
            while await receive_async(connection) != "stop":
                pass
        finally:
            await app.stop()
    connection.send("stopped")


def controller_main(connection: Connection, options: ControllerOptions) -> None:
    """Process entry point (spawned): the controller, logging warnings only to nowhere, or
    everything from info up to `options.log_file`."""
    if options.log_file is None:
        configure_logging("json", "warning", stream=open(os.devnull, "w"))  # noqa: SIM115
    else:
        configure_logging("json", "info", stream=open(options.log_file, "a"))  # noqa: SIM115
    run_child(connection, _serve(connection, options), uvloop=options.uvloop)
