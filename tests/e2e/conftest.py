"""The real control plane (realcluster/): one per test session, shared by the end-to-end
tests on it and the differential suite that compares kubesim with it; `own_real_cluster`
for a test whose cluster-wide writes the others must not see."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from realcluster.binaries import BinariesUnavailable, ensure_built
from realcluster.cluster import RealCluster
from tests.conftest import REQUIRE_REAL_CLUSTER


def built_or_skip() -> Path:
    """realcluster/build's bin folder (built or reused); the test skipped with the reason
    when it cannot be built here, failed instead under REQUIRE_REAL_CLUSTER=1 (CI)."""
    try:
        return ensure_built()
    except BinariesUnavailable as error:
        if os.environ.get(REQUIRE_REAL_CLUSTER) == "1":
            pytest.fail(f"{REQUIRE_REAL_CLUSTER}=1: {error}")
        pytest.skip(str(error))


@contextmanager
def _started(workdir: Path) -> Iterator[RealCluster]:
    with RealCluster(workdir, built_or_skip()) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    with _started(tmp_path_factory.mktemp("realcluster")) as cluster:
        yield cluster


@pytest.fixture
def own_real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    with _started(tmp_path_factory.mktemp("own-realcluster")) as cluster:
        yield cluster
