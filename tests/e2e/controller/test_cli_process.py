"""`graceful-drain controller` as a real process: JSON logs, serving, SIGTERM shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from lightkube import AsyncClient
from lightkube.resources.coordination_v1 import Lease

from graceful_drain.controller.serving.webhook import WEBHOOK_PATH
from kubesim.sim import KubeSim
from tests.e2e.cli import SRC, run_cli

from .conftest import DEADLINE, WebhookCerts

pytestmark = pytest.mark.e2e


async def next_log(stream: asyncio.StreamReader, message: str) -> dict[str, Any]:
    """The next JSON log line whose msg is `message` (earlier lines are skipped)."""
    while True:
        line = await stream.readline()
        if not line:
            raise AssertionError(f"the controller exited before logging {message!r}")
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("msg") == message:
            return record


@contextlib.asynccontextmanager
async def controller_process(
    sim: KubeSim, certs: WebhookCerts, **env: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, asyncio.StreamReader]]:
    """`graceful-drain controller` on loopback ports, logging JSON to the stderr it yields;
    `env` adds variables. Killed on the way out if a test left it running."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "graceful_drain.cli", "controller",
        "--bind-address", "127.0.0.1", "--webhook-port", "0", "--metrics-port", "0",
        env={
            **os.environ,
            "PYTHONPATH": str(SRC),
            "GRACEFUL_DRAIN_KUBECONFIG": str(sim.kubeconfig_path),
            "GRACEFUL_DRAIN_TLS_CERT_FILE": str(certs.cert_file),
            "GRACEFUL_DRAIN_TLS_KEY_FILE": str(certs.key_file),
            "GRACEFUL_DRAIN_LOG_FORMAT": "json",
            **env,
        },
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        yield process, process.stderr
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_controller_serves_then_stops_cleanly_on_sigterm(
    sim: KubeSim, certs: WebhookCerts, https: aiohttp.ClientSession
) -> None:
    async with controller_process(sim, certs) as (process, stderr):
        async with asyncio.timeout(DEADLINE * 2):
            started = await next_log(stderr, "controller started")
        assert started["level"] == "info"
        url = f"https://127.0.0.1:{started['webhook_port']}{WEBHOOK_PATH}"
        async with https.post(url, data=b"{}") as response:
            assert response.status == 200
            review = await response.json()
        assert review["response"]["allowed"] is True
        async with asyncio.timeout(DEADLINE):
            admission = await next_log(stderr, "admission")
        assert admission["reason"] == "malformed-review"
        assert admission["decision"] == "allow"

        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(DEADLINE):
            await next_log(stderr, "shutting down")
            assert await process.wait() == 0


@pytest.mark.parametrize("env", [{"GRACEFUL_DRAIN_NAMESPACES": ",,"}, {}], ids=["variable", "flag"])
async def test_a_namespace_list_naming_none_stops_the_controller_with_exit_2(
    sim: KubeSim, env: dict[str, str]
) -> None:
    """v2: ",," used to mean "every namespace", the opposite of a scoped install."""
    flags = [] if env else ["--namespaces", ",,"]
    code, _, err = await run_cli(
        "controller", "--self-signed", "--kubeconfig", str(sim.kubeconfig_path), *flags,
        env={"PATH": os.environ.get("PATH", ""), **env}, bound=DEADLINE,
    )  # fmt: skip

    assert code == 2
    assert "--namespaces (GRACEFUL_DRAIN_NAMESPACES): ',,' names no namespace" in err.decode()


async def test_sigterm_releases_the_lease_so_a_successor_need_not_wait_it_out(
    sim: KubeSim, certs: WebhookCerts, lk: AsyncClient
) -> None:
    """Issue 15: a restart costs the successor one acquire round (~2-4 s), not the 15 s Lease.
    The released Lease names no holder, which a successor takes over at once (lease.judge)."""
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "graceful-drain"}})
    leader = {"POD_NAME": "graceful-drain-old", "POD_NAMESPACE": "graceful-drain",
              "GRACEFUL_DRAIN_LEADER_ELECT": "true"}  # fmt: skip
    async with controller_process(sim, certs, **leader) as (process, stderr):
        async with asyncio.timeout(DEADLINE * 2):
            await next_log(stderr, "became leader")
        held = await lk.get(Lease, "graceful-drain", namespace="graceful-drain")
        assert held.spec.holderIdentity == "graceful-drain-old"

        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(DEADLINE):
            await next_log(stderr, "lease released")
            assert await process.wait() == 0
        released = await lk.get(Lease, "graceful-drain", namespace="graceful-drain")
        assert released.spec.holderIdentity == ""
        assert released.spec.leaseDurationSeconds == 1
