"""The two servers the differential suite compares, each behind the same raw-JSON client:
kubesim as a user starts it (`kubesim serve --scenario two-nodes.yaml --setup-only`, its own
process) and the real control plane (realcluster/)."""

from __future__ import annotations

import base64
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
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
    # Compacts the server's history (etcd's, or kubesim's own), returning once it is done.
    compact: Callable[[], None] | None = None

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


SCENARIO_ARGS = ("--scenario", str(SCENARIO), "--setup-only")


@contextmanager
def kubesim_serve(workdir: Path, args: Sequence[str] = SCENARIO_ARGS) -> Iterator[Endpoint]:
    """`kubesim serve ARGS` (by default the two-nodes scenario; `()`: `kubesim serve` alone,
    as a newcomer starts it)."""
    kubeconfig = kubesim_kubeconfig(workdir)
    argv = [sys.executable, "-m", "kubesim.cli", "serve", *args, "--kubeconfig", str(kubeconfig)]
    child = Child("kubesim", argv, workdir / "kubesim.log")
    try:
        # It prints one line ending with the kubeconfig's path once its nodes are set up.
        wait_until("kubesim serve", lambda: str(kubeconfig) in child.log_tail(), START_TIMEOUT,
                   child)  # fmt: skip
        endpoint = endpoint_from_kubeconfig("kubesim", kubeconfig)
        yield replace(endpoint, compact=lambda: _compact(child))
    finally:
        child.stop()


def _compact(child: Child) -> None:
    """`kubesim serve` compacts its history on SIGUSR1 and says so on stderr."""
    done = "kubesim: history compacted"
    before = child.log_path.read_text().count(done)
    child.process.send_signal(signal.SIGUSR1)
    wait_until("kubesim's compaction", lambda: child.log_path.read_text().count(done) > before,
               START_TIMEOUT, child)  # fmt: skip
