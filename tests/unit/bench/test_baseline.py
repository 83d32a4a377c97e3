"""`--baseline REF`: another commit's figures beside this checkout's (bench/baseline.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from bench import baseline
from bench.baseline import BaselineError, Comparison, compare
from bench.report import Row
from bench.stats import Bound, Target
from bench.webhook import baseline_server

from graceful_drain.controller.decision.lookups import PodFound

SYNC = Comparison("memory", "seconds", "time to synced", largest="pods",
                  target=Target("this ÷ baseline", Bound.AT_MOST, 0.5))  # fmt: skip
DRAIN = Comparison("drain", "drain", "drain s", largest="count", key=("client",))


def memory_rows(*seconds_by_size: tuple[int, float | None]) -> list[Row]:
    return [{"pods": pods, "seconds": seconds} for pods, seconds in seconds_by_size]


@pytest.mark.parametrize(
    ("this", "old", "expected_ratio", "met"),
    [
        (memory_rows((10, 0.1), (100, 2.0)), memory_rows((10, 0.1), (100, 4.0)), 0.5, True),
        (memory_rows((10, 0.1), (100, 3.0)), memory_rows((10, 9.0), (100, 4.0)), 0.75, False),
        # a size missing from one run is shown, never met
        (memory_rows((10, 0.1), (100, None)), memory_rows((100, 4.0)), None, False),
    ],
)
def test_the_largest_size_is_compared_and_its_target_evaluated(
    this: list[Row], old: list[Row], expected_ratio: float | None, met: bool
) -> None:
    table = compare("0123456789abcdef", {"memory": this}, {"memory": old}, [SYNC])
    (row,) = table.rows
    assert row["where"] == "pods = 100"
    assert row["ratio"] == (None if expected_ratio is None else pytest.approx(expected_ratio))
    assert [verdict.met for verdict in table.verdicts] == [met]
    assert "0123456789ab" in table.title


def test_rows_are_matched_by_their_key_columns_at_the_largest_count() -> None:
    this: list[Row] = [
        {"client": "kubectl", "count": 1, "drain": 1.0},
        {"client": "kubectl", "count": 50, "drain": 5.0},
        {"client": "karpenter", "count": 50, "drain": 4.0},
    ]
    old: list[Row] = [
        {"client": "karpenter", "count": 50, "drain": 8.0},
        {"client": "kubectl", "count": 50, "drain": 10.0},
    ]
    table = compare("abc", {"drain": this}, {"drain": old}, [DRAIN])
    assert [(row["where"], row["ratio"]) for row in table.rows] == [
        ("karpenter, count = 50", 0.5),
        ("kubectl, count = 50", 0.5),
    ]
    assert table.verdicts == []


def test_the_shipped_comparisons_hold_kubesims_cpu_per_rollout_to_half() -> None:
    this: list[Row] = [
        {"client": "kubectl", "count": 50, "drain": 5.0, "cpu": 3.0},
        {"client": "karpenter", "count": 50, "drain": 5.0, "cpu": 4.0},
    ]
    old: list[Row] = [
        {"client": "kubectl", "count": 50, "drain": 9.0, "cpu": 7.0},
        {"client": "karpenter", "count": 50, "drain": 9.0, "cpu": 7.0},
    ]
    table = compare("abc", {"drain": this}, {"drain": old}, baseline.COMPARISONS)
    cpu = {str(row["where"]): row["ratio"] for row in table.rows if "CPU" in str(row["what"])}
    assert cpu == {"karpenter, count = 50": pytest.approx(4 / 7),
                   "kubectl, count = 50": pytest.approx(3 / 7)}  # fmt: skip
    assert [(v.met, v.where) for v in table.verdicts] == [
        (False, "karpenter, count = 50"),
        (True, "kubectl, count = 50"),
    ]


def test_the_baseline_runs_only_the_parts_a_comparison_reads() -> None:
    from bench.cli import PARTS

    assert baseline.compared_parts(PARTS) == ["memory", "drain"]
    assert baseline.compared_parts(["webhook", "drain"]) == ["drain"]
    assert baseline.compared_parts(["webhook", "detector"]) == []


def test_a_name_that_is_no_commit_is_refused_with_its_name() -> None:
    with pytest.raises(BaselineError, match="no-such-ref"):
        baseline.resolve("no-such-ref")


def test_the_export_holds_the_commits_product_and_kubesim() -> None:
    with baseline.exported(baseline.resolve("HEAD")) as folders:
        assert [folder.name for folder in folders] == ["src", "src"]
        assert (folders[0] / "graceful_drain" / "__init__.py").is_file()
        assert (folders[1] / "kubesim" / "__init__.py").is_file()
    assert not folders[0].exists()


def test_the_command_line_refuses_a_bad_baseline_with_exit_2() -> None:
    root = Path(baseline.ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "memory", "--baseline", "no-such-ref",
         "--no-write"],
        cwd=root, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--baseline 'no-such-ref': not a commit" in done.stderr


def test_the_command_line_refuses_a_baseline_for_parts_it_cannot_compare() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "detector", "--baseline", "HEAD",
         "--no-write"],
        cwd=Path(baseline.ROOT), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--baseline compares only ['memory', 'drain', 'webhook']" in done.stderr


def test_the_baseline_servers_list_pages_come_back_as_written(tmp_path: Path) -> None:
    items = [{"metadata": {"name": f"pod-{i}"}} for i in range(7)]
    path = tmp_path / "Pod.pickle"
    assert baseline_server.write_pages(items, path, page=3) == 7
    assert [len(page) for page in baseline_server.read_pages(path)] == [3, 3, 1]
    assert [item for page in baseline_server.read_pages(path) for item in page] == items


def test_the_baseline_server_refuses_a_product_from_outside_the_commits_folders(
    tmp_path: Path,
) -> None:
    with pytest.raises(RuntimeError, match="imported graceful_drain from"):
        baseline_server._check_origin((str(tmp_path),))
    import graceful_drain

    baseline_server._check_origin((str(Path(graceful_drain.__file__).parent.parent),))


async def test_the_memory_watches_send_bookmarks_so_the_informer_never_relists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a silent watch would make the informer re-list after its silence limit, and a list
    # of the webhook server's (a generator) can be read only once: its cache would empty
    from bench.webhook import servers

    from graceful_drain.kube.client import RawWatchEvent
    from graceful_drain.kube.informer import ListChunk

    monkeypatch.setattr(servers, "BOOKMARK_SECONDS", 0.0)
    monkeypatch.setattr(baseline_server, "BOOKMARK_SECONDS", 0.0)
    watches = [
        servers.MemoryListWatch([]).watch("7", 60),
        baseline_server.PagedListWatch(ListChunk, RawWatchEvent, None).watch("7", 60),
    ]
    for watch in watches:
        for _ in range(2):
            event = await anext(watch)
            assert (event.type, event.object) == (
                "BOOKMARK",
                {"metadata": {"resourceVersion": "7"}},
            )


class _Pods:
    def __init__(self, names: set[str]) -> None:
        self._names = names

    def get(self, namespace: str, name: str) -> str | None:
        return f"{namespace}/{name}" if name in self._names else None


class _Cache:
    """What `instant_pod_reads` uses of a ClusterCache: the pod cache, lookup_pod, read_pod."""

    def __init__(self, cached: set[str]) -> None:
        self.pods = _Pods(cached)
        self.live_reads: list[str] = []

    async def lookup_pod(self, namespace: str, name: str, *, budget: float) -> object:
        cached = self.pods.get(namespace, name)
        return (
            ("found", cached)
            if cached is not None
            else await self.read_pod(namespace, name, budget=budget)
        )

    async def read_pod(self, namespace: str, name: str, *, budget: float) -> object:
        self.live_reads.append(name)
        return ("unavailable", name)


def test_instant_pod_reads_answer_a_cached_pod_in_process_and_read_the_others_live() -> None:
    cache = _Cache({"web-1"})
    baseline_server.instant_pod_reads(cache)
    read = cache.read_pod
    assert asyncio.run(read("shop", "web-1", budget=1.0)) == ("found", "shop/web-1")
    assert cache.live_reads == []
    assert asyncio.run(read("shop", "gone", budget=1.0)) == ("unavailable", "gone")
    assert asyncio.run(cache.lookup_pod("shop", "gone", budget=1.0)) == ("unavailable", "gone")
    assert cache.live_reads == ["gone", "gone"]


def test_instant_pod_reads_leave_a_cache_without_live_pod_reads_alone() -> None:
    class Old:
        pods = _Pods(set())

    old = Old()
    baseline_server.instant_pod_reads(old)
    assert not hasattr(old, "read_pod")


def test_instant_pod_reads_find_a_cached_pod_without_lookup_pod() -> None:
    """This checkout's ClusterCache (`cached_pod`, no `lookup_pod`): the cached pod is answered
    as decision/lookups.py's PodFound, the others still read live."""

    class Current:
        def __init__(self) -> None:
            self.pods = _Pods({"web-1"})
            self.live_reads: list[str] = []

        async def read_pod(self, namespace: str, name: str, *, budget: float) -> object:
            self.live_reads.append(name)
            return ("unavailable", name)

    cache = Current()
    baseline_server.instant_pod_reads(cache)
    read = cache.read_pod
    assert asyncio.run(read("shop", "web-1", budget=1.0)) == PodFound(cast(Any, "shop/web-1"))
    assert cache.live_reads == []
    assert asyncio.run(read("shop", "gone", budget=1.0)) == ("unavailable", "gone")
    assert cache.live_reads == ["gone"]
