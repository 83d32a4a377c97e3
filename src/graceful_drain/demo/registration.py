"""How the demo registers the controller's webhook: as deploy/ does, with a kubesim.pki CA.

`webhook_configuration` is deploy/base/webhook.yaml's ValidatingWebhookConfiguration (a unit
test holds the two equal) with the CA in `caBundle`, as the controller's --self-signed mode or
cert-manager's cainjector would write it. kubesim calls the webhook's Service by its DNS name
(`graceful-drain-webhook.graceful-drain.svc`), so the serving certificate is issued for it.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesim.pki import CertificateAuthority

Obj = dict[str, Any]

CONTROLLER_NAMESPACE = "graceful-drain"
SERVICE = "graceful-drain-webhook"
SERVICE_PORT = 443
CONFIGURATION = "graceful-drain"

_LABELS = {"app.kubernetes.io/name": "graceful-drain", "app.kubernetes.io/component": "controller"}

# deploy/base/webhook.yaml, without its comments.
_CONFIGURATION: Obj = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": CONFIGURATION, "labels": _LABELS},
    "webhooks": [
        {
            "name": "eviction.graceful-drain.stonal.com",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {
                "service": {
                    "name": SERVICE,
                    "namespace": CONTROLLER_NAMESPACE,
                    "path": "/validate-eviction",
                    "port": SERVICE_PORT,
                }
            },
            "rules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["pods/eviction"],
                    "scope": "Namespaced",
                }
            ],
            "matchPolicy": "Equivalent",
            "failurePolicy": "Ignore",
            "sideEffects": "NoneOnDryRun",
            "timeoutSeconds": 5,
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": ["kube-system", CONTROLLER_NAMESPACE],
                    }
                ]
            },
        }
    ],
}


def webhook_configuration(ca_pem: bytes | None = None) -> Obj:
    """The shipped configuration; with `ca_pem`, every webhook trusts that CA."""
    configuration = copy.deepcopy(_CONFIGURATION)
    if ca_pem is not None:
        bundle = base64.b64encode(ca_pem).decode()
        for webhook in configuration["webhooks"]:
            webhook["clientConfig"]["caBundle"] = bundle
    return configuration


def service_dns_names(service: str = SERVICE, namespace: str = CONTROLLER_NAMESPACE) -> list[str]:
    """The names a client may use for a Service, most specific first."""
    return [
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}",
        service,
    ]


@dataclass(frozen=True, slots=True)
class WebhookTLS:
    ca_pem: bytes
    cert_file: Path
    key_file: Path


def issue_webhook_tls(directory: Path) -> WebhookTLS:
    """A CA and a serving certificate for the webhook's Service, written under `directory`."""
    ca = CertificateAuthority("graceful-drain-demo-ca")
    pair = ca.issue_server(service_dns_names(), common_name=SERVICE)
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(pair.cert_pem)
    key_file.write_bytes(pair.key_pem)
    key_file.chmod(0o600)
    return WebhookTLS(ca.cert_pem, cert_file, key_file)
