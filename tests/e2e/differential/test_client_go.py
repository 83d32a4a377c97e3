"""client-go's informers, with client-go's default feature gates, sync against kubesim as
against kube-apiserver: `informer-sync` (realcluster/go/informer-sync, built by
realcluster/build) starts shared informers for Pods, Deployments and Nodes and exits 0 with
one line once their caches have synced. From client-go v0.35 the WatchListClient gate is on
by default, so each informer's initial list is a streaming list (a watch with
sendInitialEvents=true whose initial events end in a bookmark annotated
k8s.io/initial-events-end); a server that does not serve it leaves the informers unsynced.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from realcluster.cluster import RealCluster

from .servers import kubesim_kubeconfig, kubesim_serve

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

SYNC_TIMEOUT = "60s"  # informer-sync's own bound; it exits 1 when it passes
GUARD = 120.0  # a guard against a hang of the program itself
SYNCED = re.compile(r"^synced pods=\d+ deployments=\d+ nodes=(?P<nodes>\d+) "
                    r"WatchListClient=(?P<gate>true|false)$")  # fmt: skip


async def informer_sync(binary: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(binary), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(GUARD):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
def kubesim_kubeconfig_path(tmp_path: Path) -> Iterator[Path]:
    with kubesim_serve(tmp_path):
        yield kubesim_kubeconfig(tmp_path)


async def test_client_go_informers_sync_with_default_feature_gates(
    kubesim_kubeconfig_path: Path, real_cluster: RealCluster
) -> None:
    binary = real_cluster.bin_dir / "informer-sync"
    on_real, on_kubesim = await asyncio.gather(
        informer_sync(binary, "-kubeconfig", str(real_cluster.kubeconfig_path),
                      "-timeout", SYNC_TIMEOUT),
        informer_sync(binary, "-kubeconfig", str(kubesim_kubeconfig_path),
                      "-timeout", SYNC_TIMEOUT),
    )  # fmt: skip
    for name, (code, out, err) in (("kube-apiserver", on_real), ("kubesim", on_kubesim)):
        assert code == 0, f"informer-sync against {name} exited {code}: {err[-2000:]}"
        synced = SYNCED.match(out.strip())
        assert synced, f"informer-sync against {name} printed {out!r}"
        assert synced["gate"] == "true", "client-go's default gates turn WatchListClient on"
        assert synced["nodes"] == "2"  # node-a and node-b on both


async def test_informer_sync_reports_a_usage_error(real_cluster: RealCluster) -> None:
    code, out, err = await informer_sync(real_cluster.bin_dir / "informer-sync")
    assert (code, out) == (2, "")
    assert "usage: informer-sync -kubeconfig PATH" in err
