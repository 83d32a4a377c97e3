"""A uvicorn server with the SIGTERM integration, as a real process against kubesim: the
exit status it ends with."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

import graceful_drain
from graceful_drain.termination.actions import EXIT_CODES, Outcome
from kubesim.client import resource_path
from kubesim.sim import KubeSim
from tests.e2e.termination.scenario import NS, Obj, Workload, admin_client

pytestmark = pytest.mark.e2e

SRC = Path(graceful_drain.__file__).resolve().parents[1]
PROCESS_SAFETY_NET_SECONDS = 60.0  # only so that a broken server fails instead of hanging

SERVER = """
import sys

import uvicorn

from graceful_drain.termination.handler import install_uvicorn


async def app(scope, receive, send):
    assert scope["type"] == "lifespan"
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            print("serving", flush=True)  # uvicorn has installed its signal handlers
        else:
            await send({"type": "lifespan.shutdown.complete"})
            return


config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_level="warning")
server = uvicorn.Server(config)
termination = install_uvicorn(server, exit_with_verdict=sys.argv[1] == "exit-with-verdict")
server.run()
sys.exit(termination.exit_code())
"""


@pytest.fixture
async def workload(sim: KubeSim, tmp_path: Path) -> Any:
    async with admin_client(sim) as admin:
        yield await Workload(sim, admin, tmp_path).setup()


async def serve_until_sigterm(workload: Workload, pod: Obj, mode: str) -> int:
    """Start the server as the pod's process, SIGTERM it once it serves; its exit status."""
    script = workload.directory / "server.py"
    script.write_text(SERVER)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(SRC),
        "KUBECONFIG": str(workload.kubeconfig),
        "TERMINATION_GRACE_PERIOD_SECONDS": "30",
        **workload.downward_env(pod),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), mode, env=env, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(PROCESS_SAFETY_NET_SECONDS):
            assert await process.stdout.readline() == b"serving\n"
            process.send_signal(signal.SIGTERM)
            return await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_uvicorn_dies_of_the_sigterm_it_re_raises(workload: Workload) -> None:
    """What docs/termination-detector.md warns about: whatever the verdict, status 143."""
    pod = await workload.running_pod("web-0")
    await workload.admin.delete(resource_path("v1", "pods", NS, "web-0"))  # a drain verdict

    assert await serve_until_sigterm(workload, pod, "plain") == -signal.SIGTERM  # i.e. 143


@pytest.mark.parametrize(
    ("deleted", "outcome"),
    [(True, Outcome.DRAIN_GRACEFULLY), (False, Outcome.INDETERMINATE)],
    ids=["deleted: drain", "running: indeterminate"],
)
async def test_with_exit_with_verdict_uvicorn_exits_with_the_verdicts_code(
    workload: Workload, deleted: bool, outcome: Outcome
) -> None:
    """v2: the verdict's exit status, as `graceful-drain termination-cause` gives it."""
    pod = await workload.running_pod("web-0")
    if deleted:
        await workload.admin.delete(resource_path("v1", "pods", NS, "web-0"))

    assert await serve_until_sigterm(workload, pod, "exit-with-verdict") == EXIT_CODES[outcome]
