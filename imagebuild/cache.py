"""Where the image build keeps what is slow to make: $GRACEFUL_DRAIN_CACHE/image (default
$XDG_CACHE_HOME/graceful-drain/image, ~/.cache/graceful-drain/image without XDG_CACHE_HOME),
beside realcluster/'s binaries."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path


def cache_root() -> Path:
    return graceful_drain_cache() / "image"


def graceful_drain_cache() -> Path:
    """$GRACEFUL_DRAIN_CACHE, else graceful-drain under $XDG_CACHE_HOME (default ~/.cache), as
    realcluster/build reads them."""
    if explicit := os.environ.get("GRACEFUL_DRAIN_CACHE"):
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "graceful-drain"


def digest(parts: Iterable[str | bytes], length: int = 12) -> str:
    """A short sha256 of `parts`, each length-prefixed so that no two lists collide."""
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hasher.update(f"{len(data)}:".encode())
        hasher.update(data)
    return hasher.hexdigest()[:length]


def tree_digest(root: Path, relative: Iterable[str]) -> str:
    """The digest of the files under `relative` paths of `root` (names and contents), bytecode
    caches and egg-info left out."""
    parts: list[str | bytes] = []
    for entry in relative:
        path = root / entry
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            if file.is_dir() or "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            parts += [str(file.relative_to(root)), file.read_bytes()]
    return digest(parts)
