"""dist/release/ for this checkout: ./scripts/test builds it before pytest; a test that reads
it builds it here only when it is missing or stale (as root, with realcluster's helm)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from imagebuild.cache import cache_root
from imagebuild.release import OUT, is_current, release
from imagebuild.rootfs import ImageUnavailable
from imagebuild.signing import PUBLIC_KEY, Signer, throwaway_key

# The suite's own signing key (./scripts/test makes the same one): a throwaway, no password.
TEST_KEY_DIR = cache_root() / "release-test-key"


def current_release() -> Path:
    """dist/release/, built first when it is not this checkout's; ImageUnavailable when this
    machine cannot build it. Signed by whatever key made it (./scripts/test's or the
    suite's throwaway one): cosign.pub in the folder is the key to verify with."""
    if not is_current(OUT):
        if os.geteuid() != 0:
            raise ImageUnavailable("the release is built as root (mmdebstrap, chroot)")
        from realcluster.binaries import BinariesUnavailable, ensure_built

        try:
            bin_dir = ensure_built()
        except BinariesUnavailable as error:
            raise ImageUnavailable(f"helm: {error}") from error
        key = throwaway_key(bin_dir / "cosign", TEST_KEY_DIR)
        release(OUT, str(bin_dir / "helm"), Signer(bin_dir / "cosign", key, ""), bin_dir)
    if not (OUT / PUBLIC_KEY).is_file():
        raise ImageUnavailable(f"{OUT} holds no {PUBLIC_KEY}: an unsigned, older release")
    return OUT


def find_python(version: str) -> str | None:
    """A CPython `version` ("3.12") interpreter: python3.12 on PATH, else pyenv's; None
    when this machine has none (the tests that need it skip with that one line)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [
        shutil.which(f"python{version}"),
        *map(str, sorted(root.glob(f"versions/{version}.*/bin/python{version}"))),
    ]
    for candidate in filter(None, candidates):  # a pyenv shim on PATH may not run: try it
        ran = subprocess.run([candidate, "-c", "pass"], capture_output=True, check=False,
                             timeout=60)  # fmt: skip
        if ran.returncode == 0:
            return candidate
    return None
