"""An OCI image layout written directly: gzip'd tar layers, the image config, the manifest and
index.json, each blob named by its sha256 (https://github.com/opencontainers/image-spec).

Reproducible as far as the inputs are: entries in a fixed order, times clamped to
SOURCE_DATE_EPOCH, numeric owners only, gzip without a timestamp or a name.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

Json = dict[str, Any]

LAYOUT_VERSION = "1.0.0"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"
# The full name `docker load` and containerd's import give an OCI archive's image.
CONTAINERD_NAME = "io.containerd.image.name"
# Per-file times that would make a layer differ from one build to the next.
_VOLATILE_PAX = ("mtime", "atime", "ctime")


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int

    def json(self) -> Json:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class Layer:
    descriptor: Descriptor
    diff_id: str  # the sha256 of the uncompressed tar, which the config lists
    comment: str  # its line of the config's history


class _Hashing:
    """A write-only file that hashes (and counts) what passes through to `target`."""

    def __init__(self, target: IO[bytes] | gzip.GzipFile) -> None:
        self.target = target
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes, /) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.target.write(data)

    def flush(self) -> None:
        self.target.flush()

    def digest(self) -> str:
        return f"sha256:{self.sha.hexdigest()}"


class Layout:
    """An OCI image layout being written at `path` (emptied first)."""

    def __init__(self, path: Path, source_date_epoch: int) -> None:
        self.path = path
        self.epoch = source_date_epoch
        shutil.rmtree(path, ignore_errors=True)
        (path / "blobs" / "sha256").mkdir(parents=True)

    def _blob_path(self, digest: str) -> Path:
        return self.path / "blobs" / "sha256" / digest.removeprefix("sha256:")

    def add_json(self, media_type: str, document: Json) -> Descriptor:
        data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
        digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
        self._blob_path(digest).write_bytes(data)
        return Descriptor(media_type, digest, len(data))

    def add_layer(self, comment: str, fill: Callable[[tarfile.TarFile], None]) -> Layer:
        """A layer holding what `fill` adds to the tar it is given (through `add_entry`)."""
        partial = self.path / "blobs" / "layer.partial"
        with partial.open("wb") as file:
            compressed = _Hashing(file)
            with gzip.GzipFile(
                filename="", mode="wb", fileobj=compressed, mtime=0, compresslevel=6
            ) as gz:
                uncompressed = _Hashing(gz)
                with tarfile.open(
                    fileobj=uncompressed,
                    mode="w|",
                    format=tarfile.PAX_FORMAT,  # type: ignore[call-overload]
                ) as tar:
                    fill(tar)
        digest = compressed.digest()
        partial.rename(self._blob_path(digest))
        return Layer(
            Descriptor(LAYER_TYPE, digest, compressed.size), uncompressed.digest(), comment
        )

    def normalise(self, info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime = min(int(info.mtime), self.epoch)
        info.uname = info.gname = ""
        info.pax_headers = {k: v for k, v in info.pax_headers.items() if k not in _VOLATILE_PAX}
        return info

    def add_image(self, config: Json, layers: list[Layer]) -> Descriptor:
        """Write the config and the manifest of an image; the manifest's descriptor."""
        config = {
            **config,
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
            "history": [
                {"created": config["created"], "created_by": layer.comment} for layer in layers
            ],
        }
        return self.add_json(
            MANIFEST_TYPE,
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST_TYPE,
                "config": self.add_json(CONFIG_TYPE, config).json(),
                "layers": [layer.descriptor.json() for layer in layers],
            },
        )

    def add_bytes(self, media_type: str, data: bytes) -> Descriptor:
        """A blob of `data` as it is (an SBOM file)."""
        digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
        self._blob_path(digest).write_bytes(data)
        return Descriptor(media_type, digest, len(data))

    def add_blob(self, source: Path) -> None:
        """Copy a blob (named by its digest) from another layout's blobs/sha256/."""
        shutil.copyfile(source, self.path / "blobs" / "sha256" / source.name)

    def write_index(self, entries: list[Json]) -> None:
        """index.json (listing `entries`) and oci-layout."""
        index = {"schemaVersion": 2, "manifests": entries}
        (self.path / "index.json").write_text(json.dumps(index, sort_keys=True, indent=2) + "\n")
        (self.path / "oci-layout").write_text(
            json.dumps({"imageLayoutVersion": LAYOUT_VERSION}) + "\n"
        )

    def finish(self, config: Json, layers: list[Layer], annotations: dict[str, str]) -> Descriptor:
        """Write the config, the manifest, index.json and oci-layout; the manifest's descriptor."""
        manifest = self.add_image(config, layers)
        self.write_index([{**manifest.json(), "annotations": annotations}])
        return manifest


def copy_tar(
    layout: Layout, source: Path, keep: Callable[[str], bool]
) -> Callable[[tarfile.TarFile], None]:
    """A layer filler copying `source`'s entries whose name (without "./") `keep` accepts, in
    their order (a hard link's target comes before it)."""

    def fill(tar: tarfile.TarFile) -> None:
        with tarfile.open(source, "r:") as src:
            for info in src:
                name = info.name.removeprefix("./").rstrip("/")
                if not name or not keep(name):
                    continue
                info.name = name
                if info.islnk():
                    info.linkname = info.linkname.removeprefix("./")
                data = src.extractfile(info) if info.isreg() else None
                tar.addfile(layout.normalise(info), data)

    return fill


def copy_tree(layout: Layout, root: Path, subdir: str) -> Callable[[tarfile.TarFile], None]:
    """A layer filler adding `root`/`subdir` (and the directories above it) as `subdir`."""

    def walk() -> Iterator[Path]:
        parts = Path(subdir).parts
        for depth in range(1, len(parts)):
            yield root.joinpath(*parts[:depth])
        for directory, dirs, files in os.walk(root / subdir):
            dirs.sort()
            yield Path(directory)
            yield from (Path(directory) / name for name in sorted(files))
            # os.walk lists symlinks to directories among dirs and does not follow them
            yield from (
                Path(directory) / name for name in dirs if (Path(directory) / name).is_symlink()
            )

    def fill(tar: tarfile.TarFile) -> None:
        for path in walk():
            info = tar.gettarinfo(str(path), str(path.relative_to(root)))
            if info.isreg():
                with path.open("rb") as data:
                    tar.addfile(layout.normalise(info), data)
            else:
                tar.addfile(layout.normalise(info))

    return fill


def read_index(layout: Path) -> tuple[Json, Json]:
    """(manifest, config) of the one image in the layout at `layout`."""
    [entry] = json.loads((layout / "index.json").read_text())["manifests"]

    def blob(descriptor: Json) -> Json:
        path = layout / "blobs" / "sha256" / descriptor["digest"].removeprefix("sha256:")
        document: Json = json.loads(path.read_bytes())
        return document

    manifest = blob(entry)
    return manifest, blob(manifest["config"])


def write_archive(layout: Path, archive: Path, source_date_epoch: int) -> None:
    """The layout as one tar file (an "OCI archive": `skopeo copy oci-archive:...`, `podman
    load`, Docker 25 and later's `docker load`)."""
    partial = archive.with_suffix(".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(layout.rglob("*")):
            info = tar.gettarinfo(str(path), str(path.relative_to(layout)))
            info.mtime = min(int(info.mtime), source_date_epoch)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with path.open("rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)
    partial.rename(archive)
