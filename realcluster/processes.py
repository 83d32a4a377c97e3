"""Child processes that never outlive the launcher.

Each child runs in its own session (so a Ctrl-C in a terminal reaches only the launcher)
with the kernel's parent-death signal set to SIGKILL, so even a launcher killed with
SIGKILL leaves no orphan. `stop()` sends SIGTERM, waits, then SIGKILLs.

The parent-death signal fires when the *thread* that forked the child ends, not the
process: children are therefore always forked from one thread that lives as long as the
process, whichever thread (or event loop worker) asks for them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_STOP_GRACE = 10.0
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="child-spawner")


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Child:
    """One running binary; its stdout and stderr go to `log_path`."""

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._log = log_path.open("ab")
        self.process = _SPAWNER.submit(
            subprocess.Popen,
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            start_new_session=True,
            preexec_fn=_die_with_parent,
        ).result()

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.running:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(_STOP_GRACE)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(_STOP_GRACE)
        self._log.close()

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.running:
            self._signal(signal.SIGKILL)
            self.process.wait(_STOP_GRACE)

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)
