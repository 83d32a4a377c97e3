"""dist/release/ for this checkout: ./scripts/test builds it before pytest; a test that reads
it builds it here only when it is missing or stale (as root, with realcluster's helm)."""

from __future__ import annotations

import os
from pathlib import Path

from imagebuild.release import OUT, is_current, release
from imagebuild.rootfs import ImageUnavailable


def current_release() -> Path:
    """dist/release/, built first when it is not this checkout's; ImageUnavailable when this
    machine cannot build it."""
    if not is_current(OUT):
        if os.geteuid() != 0:
            raise ImageUnavailable("the release is built as root (mmdebstrap, chroot)")
        from realcluster.binaries import BinariesUnavailable, ensure_built

        try:
            helm = ensure_built() / "helm"
        except BinariesUnavailable as error:
            raise ImageUnavailable(f"helm: {error}") from error
        release(OUT, str(helm))
    return OUT
