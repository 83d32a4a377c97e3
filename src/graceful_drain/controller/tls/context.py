"""The webhook's serving certificate from files, reloaded in place when they change.

One `ssl.SSLContext` lives for the whole process; the HTTPS site is bound to it. A reload
calls `load_cert_chain` on that same context, so connections opened afterwards get the new
certificate while open ones keep theirs. Changes are found by polling a digest of both files
every `interval` (no inotify: Secret volumes swap a `..data` symlink, which a digest sees like
any other write). A pair that does not load (a half-written file, a key that does not match)
keeps the previous certificate in service and is retried at the next tick.

Another certificate source (the self-managed CA) can stand in by offering the same two
members: `context` and `loaded`.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from pathlib import Path
from typing import Protocol

from cryptography import x509

from graceful_drain.logs import get_logger

_log = get_logger("tls")


class ServingTLS(Protocol):
    @property
    def context(self) -> ssl.SSLContext: ...

    @property
    def loaded(self) -> bool: ...

    @property
    def not_after(self) -> float | None:
        """When the certificate served now expires (Unix seconds); None before one loads."""
        ...


def certificate_not_after(pem: bytes) -> float:
    """The expiry (Unix seconds) of the first certificate in `pem`, the one served."""
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp()


def server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class ReloadingTLS:
    """A component (start/stop) that keeps `context` in step with the certificate files."""

    name = "tls-files"

    def __init__(self, cert_file: Path, key_file: Path, *, interval: float = 10.0) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.interval = interval
        self._context = server_context()
        self._digest: bytes | None = None
        self._task: asyncio.Task[None] | None = None
        self.reloads = 0  # successful loads, the first one included
        self._not_after: float | None = None

    @property
    def context(self) -> ssl.SSLContext:
        return self._context

    @property
    def loaded(self) -> bool:
        return self._digest is not None

    @property
    def not_after(self) -> float | None:
        return self._not_after

    def _read_digest(self) -> bytes:
        digest = hashlib.sha256()
        for path in (self.cert_file, self.key_file):
            digest.update(path.read_bytes())
            digest.update(b"\0")
        return digest.digest()

    def reload_if_changed(self) -> bool:
        """Load the files if their content changed since the last load. True if it loaded."""
        try:
            digest = self._read_digest()
        except OSError as error:
            _log.warning("cannot read TLS files", error=str(error), cert=str(self.cert_file))
            return False
        if digest == self._digest:
            return False
        try:
            # Trial load first: a failed load_cert_chain can leave a context holding the new
            # certificate with the old key, which would break every later handshake.
            server_context().load_cert_chain(self.cert_file, self.key_file)
            not_after = certificate_not_after(self.cert_file.read_bytes())
            self._context.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError, ValueError) as error:
            _log.warning("TLS files do not load; keeping the previous certificate",
                         error=str(error), cert=str(self.cert_file))  # fmt: skip
            return False
        first = self._digest is None
        self._digest = digest
        self._not_after = not_after
        self.reloads += 1
        _log.info("serving certificate loaded" if first else "serving certificate reloaded",
                  cert=str(self.cert_file))  # fmt: skip
        return True

    async def start(self) -> None:
        self.reload_if_changed()
        self._task = asyncio.create_task(self._poll(), name="tls-reload")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.reload_if_changed()
