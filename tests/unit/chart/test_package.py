"""The chart as `scripts/release` packages it: `helm package`, then every entry's time clamped
(imagebuild.release.clamp_chart_times), so the same chart is the same bytes on every build
and helm still reads it."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

from imagebuild.release import CHART, clamp_chart_times
from tests.unit.chart.rendered import KUBE_VERSION, run_helm

EPOCH = 1_000_000_000  # 2001: never the time helm stamps


def packaged(folder: Path) -> Path:
    folder.mkdir()
    run_helm("package", str(CHART), "--destination", str(folder))
    [archive] = folder.glob("*.tgz")
    return archive


def entry_times(archive: Path) -> set[int]:
    with tarfile.open(archive) as tar:
        return {int(member.mtime) for member in tar.getmembers()}


def test_a_chart_packaged_twice_is_the_same_bytes_once_its_times_are_clamped(
    tmp_path: Path,
) -> None:
    first, second = packaged(tmp_path / "first"), packaged(tmp_path / "second")
    assert EPOCH not in entry_times(first)  # helm stamps the time it ran
    helm_header = first.read_bytes()[:10]
    with tarfile.open(first) as tar:
        names = tar.getnames()
    for archive in (first, second):
        clamp_chart_times(archive, EPOCH)
    assert first.read_bytes() == second.read_bytes()
    assert entry_times(first) == {EPOCH}
    assert first.read_bytes()[:10] == helm_header  # helm's gzip header kept (no timestamp)
    assert gzip.decompress(first.read_bytes())  # a valid gzip member, CRC and length
    with tarfile.open(first) as tar:
        assert tar.getnames() == names  # helm's order
        assert {(m.uid, m.gid, m.uname, m.gname) for m in tar.getmembers()} == {(0, 0, "", "")}


def test_helm_reads_the_clamped_chart_as_the_chart_it_was_made_from(tmp_path: Path) -> None:
    archive = packaged(tmp_path / "chart")
    clamp_chart_times(archive, EPOCH)
    assert (
        run_helm("show", "chart", str(archive)).stdout
        == run_helm("show", "chart", str(CHART)).stdout
    )
    args = ("--namespace", "graceful-drain", "--kube-version", KUBE_VERSION)
    assert (
        run_helm("template", "gd", str(archive), *args).stdout
        == run_helm("template", "gd", str(CHART), *args).stdout
    )
