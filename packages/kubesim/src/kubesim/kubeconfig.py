"""Write a kubeconfig that kubectl, the official client and lightkube accept."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml


def kubeconfig_document(
    server_url: str, ca_pem: bytes, token: str, user: str = "admin", cluster: str = "kubesim"
) -> dict[str, object]:
    context = f"{user}@{cluster}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {
                    "server": server_url,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": context, "context": {"cluster": cluster, "user": user, "namespace": "default"}}
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(
    path: Path, server_url: str, ca_pem: bytes, token: str, user: str = "admin"
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig_document(server_url, ca_pem, token, user)))
    path.chmod(0o600)
    return path
