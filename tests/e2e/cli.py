"""The graceful-drain CLI as a process of its own, as a pod or an operator runs it, for every
end-to-end suite: exactly the environment given, bounded so that a hang fails the test."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"  # this checkout's sources


async def run_cli(
    *args: str, env: Mapping[str, str], bound: float, source: Path = SRC
) -> tuple[int, bytes, bytes]:
    """`graceful-drain ARGS` from `source` (a src/ folder, put on PYTHONPATH) with `env` and
    nothing else: (exit status, stdout, stderr). Killed if it outlives `bound` seconds."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "graceful_drain.cli", *args,
        env={**env, "PYTHONPATH": str(source)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(bound):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return int(process.returncode or 0), out, err
