"""Shared fixtures: a running kubesim and real clients pointed at it."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig

from kubesim.client import KubeClient
from kubesim.sim import KubeSim
from realcluster.binaries import go_available

if TYPE_CHECKING:
    import kubernetes

KUBECTL_TIMEOUT = 60
# Set to 1 (CI does) and the real control plane's tests fail instead of being skipped when
# its binaries cannot be built.
REQUIRE_REAL_CLUSTER = "REQUIRE_REAL_CLUSTER"
_REAL_CLUSTER_SKIPPED: list[int] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without Go the real control plane's tests are deselected, reported in one line.

    On pytest-xdist workers (scripts/test) the real control plane's tests come first: they
    are the longest and mostly wait, so the CPU-bound rest fills the cores around them
    instead of one of them running alone at the end. Every worker sorts alike (stable)."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("realcluster") is None)
    if os.environ.get(REQUIRE_REAL_CLUSTER) == "1" or go_available():
        return
    real = [item for item in items if item.get_closest_marker("realcluster")]
    if real:
        config.hook.pytest_deselected(items=real)
        items[:] = [item for item in items if not item.get_closest_marker("realcluster")]
        _REAL_CLUSTER_SKIPPED.append(len(real))
        send_to_controller(config, LINES, [_not_run_line(len(real))])


def _not_run_line(count: int) -> str:
    return (
        f"realcluster: go is not on PATH, so {count} tests on the real "
        "control plane are not run (install Go >= 1.26 to run them)"
    )


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    return _not_run_line(_REAL_CLUSTER_SKIPPED[0]) if _REAL_CLUSTER_SKIPPED else None


# What a pytest-xdist worker would have printed (its terminal is not shown) goes to the
# controlling process in the worker's output, under a key, and is printed there at the end.
LINES = "graceful_drain_lines"  # lines, printed once each
FAULT_ROWS = "graceful_drain_fault_rows"  # the fault suite's rows (tests/e2e/faults/)
_FROM_WORKERS: dict[str, list[Any]] = {}


def send_to_controller(config: pytest.Config, key: str, values: list[Any]) -> bool:
    """On a pytest-xdist worker, hand `values` to the controlling process (True); else False,
    and the caller prints them itself."""
    output: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if output is None:
        return False
    output[key] = [*output.get(key, []), *values]
    return True


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: a worker finished
def pytest_testnodedown(node: Any, error: object) -> None:
    for key in (LINES, FAULT_ROWS):
        _FROM_WORKERS.setdefault(key, []).extend(getattr(node, "workeroutput", {}).get(key, []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if rows := _FROM_WORKERS.get(FAULT_ROWS):
        from tests.e2e.faults.suite import FaultRow, table  # only once a worker sent rows

        terminalreporter.section("graceful-drain fault suite")
        terminalreporter.write_line(table([FaultRow(*row) for row in rows]))
    for line in dict.fromkeys(_FROM_WORKERS.get(LINES, [])):  # each worker deselects the same
        terminalreporter.write_line(line)


# Tests never depend on wall time: Hypothesis's deadline and too-slow health check would make
# a loaded CI machine fail tests whose behaviour is fine.
settings.register_profile("graceful-drain", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
settings.load_profile("graceful-drain")


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    async with KubeSim() as running:
        yield running


@pytest.fixture
async def lk(sim: KubeSim) -> AsyncIterator[AsyncClient]:
    """lightkube's async client, as the graceful-drain controller uses it."""
    client = AsyncClient(KubeConfig.from_file(str(sim.kubeconfig_path)))
    yield client
    await client.close()


@pytest.fixture
async def raw(sim: KubeSim) -> AsyncIterator[KubeClient]:
    """kubesim's own raw-JSON client, as admin."""
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    yield client
    await client.close()


@pytest.fixture
def core(sim: KubeSim) -> Iterator[kubernetes.client.CoreV1Api]:
    """The official Python client's CoreV1Api (imported here only: it is slow to import)."""
    import kubernetes

    api = kubernetes.config.new_client_from_config(config_file=str(sim.kubeconfig_path))
    yield kubernetes.client.CoreV1Api(api)
    api.close()


Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def kubectl_cache_args(kubeconfig: Path) -> list[str]:
    """A discovery cache per cluster: kubesim ports are reused across tests, and the kubectl
    dispatcher picks its release from the cached server version of a host:port."""
    return [f"--cache-dir={kubeconfig.parent / 'kubectl-cache'}"]


@asynccontextmanager
async def kubectl_watching(kubeconfig: Path, *args: str) -> AsyncIterator[asyncio.StreamReader]:
    """`kubectl <args>` (a `get -w`) running for the block: its standard output, line by line;
    killed when the block ends."""
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *kubectl_cache_args(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        yield proc.stdout
    finally:
        proc.kill()
        await proc.wait()


def run_kubectl(kubeconfig: Path, *args: str, check: bool = True,
                timeout: float = KUBECTL_TIMEOUT, stdin: str | None = None
                ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    result = subprocess.run(
        ["kubectl", *kubectl_cache_args(kubeconfig), *args],
        capture_output=True, text=True, env=env, timeout=timeout, input=stdin,
    )  # fmt: skip
    if check and result.returncode != 0:
        raise AssertionError(
            f"kubectl {' '.join(args)} exited {result.returncode}\n"
            f"stdout: {result.stdout}\nstderr: {result.stderr}"
        )
    return result


@pytest.fixture
def kubeconfig(sim: KubeSim) -> Iterator[Path]:
    yield sim.kubeconfig_path
