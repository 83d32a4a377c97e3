"""`python -m realcluster serve` as a person runs it: started in the background (a shell
starts a background job with SIGINT ignored), stopped by SIGINT or SIGTERM, it leaves no
process of its own behind — the control plane's nor Karpenter's."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from realcluster.binaries import BinariesUnavailable, ensure_built
from tests.conftest import REQUIRE_REAL_CLUSTER, run_kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

BOUND = 300.0  # a cold start of every component on a loaded 2-core machine; hangs only
REPO = Path(__file__).resolve().parents[3]


def processes_of(workdir: Path) -> set[int]:
    """The processes whose command line or environment names `workdir` (every child of
    `serve` does: data folder, certificates, kubeconfig)."""
    found = set()
    marker = str(workdir).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().split(") ", 1)[1].startswith("Z"):
                continue
            seen = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in seen:
            found.add(int(entry.name))
    return found


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    ("stop", "karpenter"),
    [
        pytest.param(signal.SIGINT, True, marks=pytest.mark.karpenter, id="SIGINT-karpenter"),
        pytest.param(signal.SIGTERM, False, id="SIGTERM"),
    ],
)
def test_serve_stops_every_process_it_started(
    tmp_path: Path, stop: signal.Signals, karpenter: bool
) -> None:
    try:
        ensure_built()
    except BinariesUnavailable as error:
        if os.environ.get(REQUIRE_REAL_CLUSTER) == "1":
            pytest.fail(f"{REQUIRE_REAL_CLUSTER}=1: {error}")
        pytest.skip(str(error))
    workdir = tmp_path / "serve"
    argv = [sys.executable, "-m", "realcluster", "serve", "--nodes", "node-x",
            "--workdir", str(workdir), *(["--karpenter"] if karpenter else [])]  # fmt: skip
    serve = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_ignore_sigint,  # as `serve &` in a shell script
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        # The kubeconfig's path is printed once everything runs.
        readable, _, _ = select.select([serve.stdout], [], [], BOUND)
        kubeconfig = serve.stdout.readline().strip() if readable else ""
        if not kubeconfig:
            serve.kill()
            pytest.fail(f"serve printed no kubeconfig: {serve.communicate()[1][-3000:]}")
        nodes = run_kubectl(Path(kubeconfig), "get", "nodes", "-o", "name").stdout
        assert "node/node-x" in nodes
        if karpenter:
            pools = run_kubectl(Path(kubeconfig), "get", "nodepools", "-o", "name").stdout
            assert "nodepool.karpenter.sh/default" in pools
        running = processes_of(workdir)
        expected = 6 if karpenter else 5  # etcd, apiserver, controller manager, scheduler, kwok
        assert len(running) >= expected, running

        serve.send_signal(stop)
        _, stderr = serve.communicate(timeout=BOUND)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    assert serve.returncode == 0, stderr
    assert processes_of(workdir) & running == set()
