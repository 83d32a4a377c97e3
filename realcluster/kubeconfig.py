"""A kubeconfig for one identity of the real control plane (a bearer token), as kubectl,
helm, the kube-* components and lightkube read it. realcluster's own: it borrows nothing
from kubesim, the simulator it checks."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

CLUSTER_NAME = "realcluster"


def kubeconfig_document(server: str, ca_pem: bytes, token: str, user: str) -> dict[str, object]:
    context = f"{user}@{CLUSTER_NAME}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER_NAME,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": CLUSTER_NAME, "user": user, "namespace": "default"},
            }
        ],
        "current-context": context,
    }


def write_kubeconfig(path: Path, server: str, ca_pem: bytes, token: str, user: str) -> Path:
    """Write it (mode 0600: it holds a token) and return `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig_document(server, ca_pem, token, user)))
    path.chmod(0o600)
    return path
