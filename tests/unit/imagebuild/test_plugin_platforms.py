"""The plugin's platforms (imagebuild/release.py): the wheel tags each (os, arch, python)
accepts, and the krew manifest listing one archive per platform with its sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from imagebuild.release import (
    PLUGIN,
    PLUGIN_COMPLETION,
    PLUGIN_PLATFORMS,
    PLUGIN_PYTHONS,
    krew_manifest,
    plugin_platform,
)


@pytest.mark.parametrize(
    ("system", "architecture", "python", "accepted", "refused"),
    [
        ("linux", "amd64", "3.12", ["cp312-cp312-manylinux_2_28_x86_64",
                                    "cp312-abi3-manylinux2014_x86_64", "py3-none-any"],
         ["cp312-cp312-manylinux_2_34_x86_64", "cp311-cp311-manylinux_2_17_x86_64",
          "cp312-cp312-macosx_11_0_arm64"]),
        ("linux", "arm64", "3.13", ["cp313-cp313-manylinux_2_17_aarch64"],
         ["cp313-cp313-manylinux_2_17_x86_64"]),
        ("darwin", "arm64", "3.11", ["cp311-cp311-macosx_11_0_arm64",
                                     "cp311-cp311-macosx_10_9_universal2"],
         ["cp311-cp311-macosx_12_0_arm64", "cp311-cp311-macosx_11_0_x86_64"]),
        ("darwin", "amd64", "3.13", ["cp313-cp313-macosx_10_13_x86_64"],
         ["cp313-cp313-macosx_11_0_arm64"]),
    ],
)  # fmt: skip
def test_each_platform_accepts_the_wheels_that_run_there_and_no_others(
    system: str, architecture: str, python: str, accepted: list[str], refused: list[str]
) -> None:
    document = plugin_platform(system, architecture, python)
    tags = set(document["compatible_tags"])
    assert set(accepted) <= tags
    assert not set(refused) & tags
    markers = document["marker_environment"]
    assert markers["python_full_version"].startswith(python)
    assert markers["sys_platform"] == system


def test_the_krew_manifest_lists_every_platform_with_its_archives_sha256(tmp_path: Path) -> None:
    archives = {}
    for system, architecture in PLUGIN_PLATFORMS:
        archive = tmp_path / f"{PLUGIN}-1.2.3-{system}-{architecture}.tar.gz"
        archive.write_bytes(f"{system}/{architecture}".encode())
        archives[(system, architecture)] = archive
    manifest = yaml.safe_load(krew_manifest("1.2.3", archives))
    platforms = manifest["spec"]["platforms"]
    assert len(platforms) == len(PLUGIN_PLATFORMS) == 3
    for entry in platforms:
        labels = entry["selector"]["matchLabels"]
        archive = archives[(labels["os"], labels["arch"])]
        assert entry["uri"].endswith(f"/v1.2.3/{archive.name}")
        assert entry["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
        assert [f["from"] for f in entry["files"]] == [PLUGIN, PLUGIN_COMPLETION]
    assert all(python in manifest["spec"]["description"] for python in PLUGIN_PYTHONS)
