"""An OCI registry on loopback: CNCF distribution's `registry` (built by `realcluster/build`
from `github.com/distribution/distribution/v3/cmd/registry`), no authentication, its
storage a folder of the caller's.

    with Registry(bin_dir, workdir) as registry:
        registry.url            # http://127.0.0.1:PORT
        registry.host           # 127.0.0.1:PORT, as helm's oci:// and an image reference name it
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from types import TracebackType

from realcluster.cluster import START_TIMEOUT, free_port, wait_until
from realcluster.processes import Child

CONFIG = """\
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""


class Registry:
    """`registry serve` of a config written into `workdir`: loopback only, filesystem storage
    in `workdir`/storage; started on enter (once /v2/ answers 200), stopped on exit."""

    def __init__(self, bin_dir: Path, workdir: Path) -> None:
        self.bin_dir = bin_dir
        self.workdir = workdir
        self.port = 0
        self.child: Child | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    @property
    def storage(self) -> Path:
        return self.workdir / "storage"

    def _serving(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/v2/", timeout=2) as response:
                return int(response.status) == 200
        except OSError:  # refused, reset, or an HTTPError (an OSError too)
            return False

    def start(self) -> Registry:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.storage.mkdir(exist_ok=True)
        self.port = free_port()
        config = self.workdir / "config.yml"
        config.write_text(CONFIG.format(storage=self.storage, port=self.port))
        # No tracing exporter (distribution's default would try an OTLP endpoint).
        env = {**os.environ, "OTEL_TRACES_EXPORTER": "none"}
        self.child = Child(
            "registry", [str(self.bin_dir / "registry"), "serve", str(config)],
            self.workdir / "registry.log", env=env,
        )  # fmt: skip
        try:
            wait_until("the registry's /v2/", self._serving, START_TIMEOUT, self.child)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
