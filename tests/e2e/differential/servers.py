"""The two servers the differential suite compares, each behind the same raw-JSON client:
kubesim as a user starts it (`kubesim serve --scenario two-nodes.yaml --setup-only`, its own
process) and the real control plane (realcluster/)."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from kubesim.client import KubeClient
from realcluster.cluster import wait_until
from realcluster.processes import Child

SCENARIO = Path(__file__).with_name("two-nodes.yaml")
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Endpoint:
    name: str
    server: str
    token: str
    ca_pem: bytes

    def client(self) -> KubeClient:
        return KubeClient(self.server, self.token, self.ca_pem, user_agent="differential")


def endpoint_from_kubeconfig(name: str, kubeconfig: Path) -> Endpoint:
    document = yaml.safe_load(kubeconfig.read_text())
    cluster = document["clusters"][0]["cluster"]
    user = document["users"][0]["user"]
    return Endpoint(name, cluster["server"], user["token"],
                    base64.b64decode(cluster["certificate-authority-data"]))  # fmt: skip


def kubesim_kubeconfig(workdir: Path) -> Path:
    """Where `kubesim_serve(workdir)` has `kubesim serve` write its kubeconfig."""
    return workdir / "kubesim.kubeconfig"


@contextmanager
def kubesim_serve(workdir: Path) -> Iterator[Endpoint]:
    kubeconfig = kubesim_kubeconfig(workdir)
    scenario = ["--scenario", str(SCENARIO), "--setup-only"]
    argv = [
        sys.executable,
        "-m",
        "kubesim.cli",
        "serve",
        *scenario,
        "--kubeconfig",
        str(kubeconfig),
    ]
    child = Child("kubesim", argv, workdir / "kubesim.log")
    try:
        # It prints the kubeconfig's path once the scenario's nodes are set up.
        wait_until("kubesim serve", lambda: str(kubeconfig) in child.log_tail(), START_TIMEOUT,
                   child)  # fmt: skip
        yield endpoint_from_kubeconfig("kubesim", kubeconfig)
    finally:
        child.stop()
