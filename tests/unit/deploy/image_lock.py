"""deploy/image/requirements.lock read as pip-compile writes it: one pin per requirement, its
hashes, and the `# via` lines saying what asked for it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s;\\]+)\s*(?:;\s*(?P<marker>[^\\]+?))?\s*\\?$"
)
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


@dataclass
class Pin:
    name: str  # canonical (PEP 503)
    version: str
    marker: str | None
    hashes: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)


def read_lock(path: Path) -> list[Pin]:
    pins: list[Pin] = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not pins):
            continue  # the header
        if not line[0].isspace():
            match = _PIN.match(line)
            assert match, f"{path.name}: not a pinned requirement: {line!r}"
            name = canonicalize_name(match["name"])
            pins.append(Pin(name, match["version"], match["marker"]))
        elif stripped.startswith("--hash="):
            pins[-1].hashes += _HASH.findall(stripped)
        elif stripped.startswith("#"):
            via = stripped.lstrip("#").strip().removeprefix("via").strip()
            if via:
                pins[-1].via.append(via)
    return pins
