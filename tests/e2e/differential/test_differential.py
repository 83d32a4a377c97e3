"""kubesim measured against kube-apiserver: every interaction of the catalogue runs on both,
with the same client, in a namespace of the same name; the normalised observations must be
equal, except for the divergences docs/kubesim-fidelity.md lists (each with its reason).

The run prints `N compared, M diverged` (requests compared, requests whose answer differs).
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesim.client import ApiStatusError, KubeClient
from realcluster.cluster import RealCluster
from tests.conftest import LINES, send_to_controller

from .interactions import INTERACTIONS, Api, Observation
from .normalise import compare
from .servers import Endpoint, kubesim_serve
from .tally import TALLY

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

FIDELITY_DOC = Path(__file__).resolve().parents[3] / "docs" / "kubesim-fidelity.md"
KNOWN_ROW = re.compile(r"^\| `(?P<interaction>[^`]+)` \| `(?P<step>[^`]+)` \|", re.MULTILINE)


def known_divergences() -> set[tuple[str, str]]:
    """(interaction, step) pairs docs/kubesim-fidelity.md lists as kept on purpose or
    not fixed yet."""
    text = FIDELITY_DOC.read_text(encoding="utf-8")
    return {(m["interaction"], m["step"]) for m in KNOWN_ROW.finditer(text)}


@pytest.fixture(scope="module", autouse=True)
def report(request: pytest.FixtureRequest) -> Iterator[None]:
    """`N compared, M diverged` and every divergence, once the module's tests have run."""
    yield
    if TALLY.compared and send_to_controller(request.config, LINES, TALLY.summary()):
        return
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or not TALLY.compared:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        for line in TALLY.summary():
            reporter.write_line(line)


@pytest.fixture(scope="module")
def kubesim_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    with kubesim_serve(tmp_path_factory.mktemp("kubesim-serve")) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def real_endpoint(real_cluster: RealCluster) -> Endpoint:
    def compact() -> None:
        # The watch cache hides etcd's compaction: a watch from an older revision gets 410
        # Gone once kube-apiserver, restarted, rebuilds it at etcd's current revision.
        # kubesim's compaction forgets its history and drops its watches, the same.
        real_cluster.stop_apiserver()
        real_cluster.compact_etcd()
        real_cluster.start_apiserver()

    return Endpoint("kube-apiserver", real_cluster.server, real_cluster.admin_token,
                    real_cluster.ca_pem, compact)  # fmt: skip


async def observe(endpoint: Endpoint, name: str, namespace: str) -> list[Observation]:
    client = endpoint.client()
    try:
        await make_namespace(client, namespace)
        api = Api(client, namespace, compact=endpoint.compact)
        interaction = dict(INTERACTIONS)[name]
        await interaction(api)
        return api.observations
    finally:
        # Nothing an interaction made outlives it: later suites drain the same nodes, and a
        # Deployment left Ready on one would be in their drains.
        with contextlib.suppress(ApiStatusError):
            await client.delete(f"/api/v1/namespaces/{namespace}")
        await client.close()


async def make_namespace(client: KubeClient, name: str) -> None:
    await client.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    # The ServiceAccount admission plugin wants the namespace's default ServiceAccount, which
    # the ServiceAccount controller creates soon after the namespace: don't wait for it.
    with contextlib.suppress(ApiStatusError):
        await client.create(f"/api/v1/namespaces/{name}/serviceaccounts",
                            {"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "default"}})  # fmt: skip


@pytest.mark.parametrize("name", [name for name, _ in INTERACTIONS])
async def test_kubesim_answers_as_kube_apiserver(
    name: str, kubesim_endpoint: Endpoint, real_endpoint: Endpoint
) -> None:
    namespace = f"diff-{secrets.token_hex(3)}"
    real = await observe(real_endpoint, name, namespace)
    simulated = await observe(kubesim_endpoint, name, namespace)
    assert [o.step for o in simulated] == [o.step for o in real]
    known = known_divergences()
    unexpected = []
    for ours, theirs in zip(simulated, real, strict=True):
        TALLY.compared += 1
        differences = compare(ours.code, theirs.code, ".code") + compare(ours.body, theirs.body)
        if not differences:
            continue
        TALLY.diverged.append(f"{name} / {ours.step}: " + " | ".join(differences[:3]))
        if (name, ours.step) not in known:
            unexpected.append(f"{ours.step}: kubesim != kube-apiserver\n  " +
                              "\n  ".join(differences[:8]))  # fmt: skip
    assert not unexpected, "\n".join(unexpected)
