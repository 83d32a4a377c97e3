"""What the figures were measured on: CPU, cores, memory, Python, loop, and how busy it was."""

from __future__ import annotations

import os
import platform
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    return "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def describe() -> dict[str, str]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{_cpu_model()}, {os.cpu_count()} cores",
        "memory": _memory(),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "libraries": (
            f"aiohttp {_version('aiohttp')}, uvloop {_version('uvloop')}, "
            f"lightkube {_version('lightkube')}, msgspec {_version('msgspec')}"
        ),
        "load average at start (1/5/15 min)": load_average(),
        "code": code_folders(),
    }


def code_folders() -> str:
    """Where the product and kubesim are imported from (a --baseline run's are elsewhere)."""
    import graceful_drain
    import kubesim

    return ", ".join(str(Path(module.__file__ or "?").parent.parent)
                     for module in (graceful_drain, kubesim))  # fmt: skip
