"""What deploy/ installs, by the names the drain tests refer to, and where their workloads run."""

from __future__ import annotations

from pathlib import Path

from kubesim.apiserver.auth import service_account_user
from tests.e2e.watching import BOUND

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
NAMESPACE = "graceful-drain"  # deploy/base/namespace.yaml
SERVICE_ACCOUNT = "graceful-drain"
CONTROLLER_DEPLOYMENT = "graceful-drain"
WEBHOOK_CONFIGURATION = "graceful-drain"  # deploy/base/webhook.yaml
CONTROLLER_USER = service_account_user(NAMESPACE, SERVICE_ACCOUNT).username
WORKLOADS = "default"

__all__ = [
    "BOUND", "CONTROLLER_DEPLOYMENT", "CONTROLLER_USER", "DEPLOY", "NAMESPACE", "REPO",
    "SERVICE_ACCOUNT", "WEBHOOK_CONFIGURATION", "WORKLOADS",
]  # fmt: skip
