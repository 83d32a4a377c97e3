"""What the controller image declares: one home for the facts deploy/Dockerfile also states
(tests/unit/deploy/test_dockerfile.py compares them; the image test reads them back from the
built image)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGE_DIR = REPO / "deploy" / "image"
LOCK = IMAGE_DIR / "requirements.lock"
INSTALL_VENV = IMAGE_DIR / "install-venv"

# Debian 12's python3 is 3.11, the minor pyproject.toml's requires-python and mypy target.
DEBIAN_SUITE = "bookworm"
PYTHON_MINOR = "3.11"
GLIBC_MINOR = 36  # bookworm's glibc 2.36: the newest manylinux wheels the image can run
# The root filesystem: dpkg's Essential set plus these (and what they depend on).
DEBIAN_PACKAGES = ("python3",)
# Left out of the root filesystem: documentation, manuals and translations (the licences
# stay, in /usr/share/doc/*/copyright).
DPKG_PATH_FILTERS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
)

VENV = "/opt/graceful-drain"
# deploy/base/deployment.yaml's runAsUser/runAsGroup (no passwd entry, as in the Dockerfile).
USER = "65532:65532"
ENTRYPOINT = ("graceful-drain",)  # the console script pyproject.toml declares
CMD = ("--help",)
EXPOSED_PORTS = (8443, 8080)  # webhook, metrics (deployment.yaml's containerPorts)
ENV = (
    f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONDONTWRITEBYTECODE=1",
    "PYTHONUNBUFFERED=1",
)
# The name deploy/base/deployment.yaml runs; the tag is pyproject.toml's version.
REPOSITORY = "ghcr.io/stonal/graceful-drain"
# Where the sources are published: the image's org.opencontainers.image.source label.
SOURCE_URL = "https://github.com/stonal/graceful-drain"

# What the wheel is built from: the controller's package only (kubesim, the simulator, is not
# shipped in the image).
WHEEL_SOURCES = ("pyproject.toml", "README.md", "src/graceful_drain")
