"""graceful-drain: node drains never take the last Ready pod of a Deployment.

``__version__`` is read on first use, from the installed distribution's metadata file
(the first ``Version:`` line), not through ``importlib.metadata``: that module pulls in the
email parser and zipfile, tens of milliseconds that every command — the termination-cause
detector inside a pod's grace period first — would pay at start-up.
"""

from __future__ import annotations

import sys
from pathlib import Path

DISTRIBUTION = "graceful_drain"
UNKNOWN_VERSION = "0.0.0+unknown"  # run from a source tree that was never installed


def _installed_version() -> str:
    """The version of the first ``graceful_drain-*.dist-info`` (or ``.egg-info``) on
    sys.path, as importlib.metadata would find it; UNKNOWN_VERSION when there is none."""
    for entry in sys.path:
        folder = Path(entry or ".")
        try:
            candidates = sorted(folder.glob(f"{DISTRIBUTION}-*.dist-info")) + sorted(
                folder.glob(f"{DISTRIBUTION}*.egg-info")
            )
        except OSError:
            continue
        for candidate in candidates:
            metadata = candidate / ("METADATA" if candidate.suffix == ".dist-info" else "PKG-INFO")
            try:
                with metadata.open(encoding="utf-8") as lines:
                    for line in lines:
                        if line.startswith("Version:"):
                            return line.partition(":")[2].strip()
                        if not line.strip():  # the headers end at the first blank line
                            break
            except OSError:
                continue
    return UNKNOWN_VERSION


def __getattr__(name: str) -> str:
    if name == "__version__":
        version = _installed_version()
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
