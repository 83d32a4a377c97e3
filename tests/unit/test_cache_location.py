"""One cache root for everything slow to build, moved by $GRACEFUL_DRAIN_CACHE or
$XDG_CACHE_HOME (a cold CI run measured beside warm caches it must not touch): the real
control plane's binaries (realcluster/build) and the image's bootstrap and wheels
(imagebuild/cache.py) read it the same way."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from imagebuild.cache import cache_root

BUILD = Path(__file__).resolve().parents[2] / "realcluster" / "build"


def printed_bin_dir(env: dict[str, str]) -> Path:
    printed = subprocess.run([str(BUILD), "--print"], env=env, capture_output=True, text=True,
                             check=True, timeout=60)  # fmt: skip
    return Path(printed.stdout.strip())


@pytest.mark.parametrize(
    ("graceful_drain_cache", "xdg_cache_home", "expected"),
    [
        ("/tmp/gd-cache", "/tmp/xdg", "/tmp/gd-cache"),
        (None, "/tmp/xdg", "/tmp/xdg/graceful-drain"),
        (None, None, "HOME/.cache/graceful-drain"),
        ("", "", "HOME/.cache/graceful-drain"),
    ],
)
def test_the_binaries_and_the_image_share_one_movable_cache_root(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    graceful_drain_cache: str | None, xdg_cache_home: str | None, expected: str,
) -> None:  # fmt: skip
    monkeypatch.setenv("HOME", str(tmp_path))
    for name, value in (("GRACEFUL_DRAIN_CACHE", graceful_drain_cache),
                        ("XDG_CACHE_HOME", xdg_cache_home)):  # fmt: skip
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    root = Path(expected.replace("HOME", str(tmp_path)))
    assert cache_root() == root / "image"
    assert printed_bin_dir(dict(os.environ)).parent == root / "realcluster"
