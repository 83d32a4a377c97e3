"""imagebuild.oci: the OCI layout it writes is self-consistent (every descriptor names its
blob's sha256 and size, the config lists each layer's uncompressed digest) and the same
inputs give the same bytes. (A real OCI tool, umoci, reads the built image in
tests/e2e/real_control_plane/test_image_real.py.)"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from imagebuild import oci
from imagebuild.venv import platform_tags

EPOCH = 1_700_000_000


def make_tree(root: Path) -> None:
    venv = root / "opt" / "app"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib").mkdir()
    (venv / "bin" / "tool").write_text("#!/bin/sh\n")
    (venv / "bin" / "tool").chmod(0o755)
    (venv / "lib" / "module.py").write_text("x = 1\n")
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    os.utime(venv / "lib" / "module.py", (EPOCH + 100, EPOCH + 100))  # newer: clamped
    os.utime(venv / "bin" / "tool", (EPOCH - 100, EPOCH - 100))  # older: kept


def make_rootfs_tar(path: Path, source: Path) -> None:
    (source / "dev").mkdir()
    (source / "dev" / "null").write_text("")  # stands in for a device node
    (source / "etc").mkdir()
    (source / "etc" / "a").write_text("a\n")
    os.link(source / "etc" / "a", source / "etc" / "b")
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("dev", "dev/null", "etc", "etc/a", "etc/b"):
            info = tar.gettarinfo(str(source / name), f"./{name}")
            info.uname = "someone"
            if info.isreg():
                with (source / name).open("rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)


def write_layout(tmp_path: Path, name: str) -> Path:
    tree, rootfs_src = tmp_path / f"{name}-tree", tmp_path / f"{name}-rootfs"
    tree.mkdir()
    rootfs_src.mkdir()
    make_tree(tree)
    rootfs = tmp_path / f"{name}-rootfs.tar"
    make_rootfs_tar(rootfs, rootfs_src)
    layout = oci.Layout(tmp_path / name, EPOCH)
    base = layout.add_layer(
        "base", oci.copy_tar(layout, rootfs, keep=lambda n: not n.startswith("dev/"))
    )
    app = layout.add_layer("app", oci.copy_tree(layout, tree, "opt/app"))
    config = {"created": "2023-11-14T22:13:20Z", "architecture": "amd64", "os": "linux"}
    layout.finish(config, [base, app], {oci.REF_NAME: "1.0"})
    return layout.path


def blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()


def layer_members(layout: Path, digest: str) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(layout, digest)))) as tar:
        return tar.getmembers()


def test_descriptors_name_their_blobs(tmp_path: Path) -> None:
    layout = write_layout(tmp_path, "image")
    index = json.loads((layout / "index.json").read_text())
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    [entry] = index["manifests"]
    assert entry["annotations"] == {oci.REF_NAME: "1.0"}
    descriptors = [entry]
    manifest, config = oci.read_index(layout)
    descriptors += [manifest["config"], *manifest["layers"]]
    for descriptor in descriptors:
        data = blob(layout, descriptor["digest"])
        assert descriptor["digest"] == f"sha256:{hashlib.sha256(data).hexdigest()}"
        assert descriptor["size"] == len(data)
    diff_ids = [
        f"sha256:{hashlib.sha256(gzip.decompress(blob(layout, layer['digest']))).hexdigest()}"
        for layer in manifest["layers"]
    ]
    assert config["rootfs"] == {"type": "layers", "diff_ids": diff_ids}
    assert [h["created_by"] for h in config["history"]] == ["base", "app"]
    assert {p.name for p in (layout / "blobs" / "sha256").iterdir()} == {
        d["digest"].removeprefix("sha256:") for d in descriptors
    }


def test_layers_are_normalised(tmp_path: Path) -> None:
    layout = write_layout(tmp_path, "image")
    manifest, _ = oci.read_index(layout)
    base, app = (layer_members(layout, layer["digest"]) for layer in manifest["layers"])
    assert [m.name for m in base] == ["dev", "etc", "etc/a", "etc/b"]  # dev/* left out
    assert base[3].islnk() and base[3].linkname == "etc/a"
    assert [m.name for m in app] == [
        "opt", "opt/app", "opt/app/bin", "opt/app/bin/python", "opt/app/bin/tool",
        "opt/app/lib", "opt/app/lib/module.py",
    ]  # fmt: skip
    by_name = {m.name: m for m in app}
    assert by_name["opt/app/bin/python"].linkname == "/usr/bin/python3"
    assert by_name["opt/app/bin/tool"].mode & 0o777 == 0o755
    assert by_name["opt/app/bin/tool"].mtime == EPOCH - 100
    assert by_name["opt/app/lib/module.py"].mtime == EPOCH
    for member in [*base, *app]:
        assert member.mtime <= EPOCH
        assert (member.uname, member.gname) == ("", "")
        assert not {"atime", "ctime", "mtime"} & member.pax_headers.keys()


def test_the_same_inputs_give_the_same_image(tmp_path: Path) -> None:
    first, second = write_layout(tmp_path, "one"), write_layout(tmp_path, "two")
    assert (first / "index.json").read_bytes() == (second / "index.json").read_bytes()
    archives = [tmp_path / "one.tar", tmp_path / "two.tar"]
    oci.write_archive(first, archives[0], EPOCH)
    oci.write_archive(second, archives[1], EPOCH)
    assert archives[0].read_bytes() == archives[1].read_bytes()
    with tarfile.open(archives[0]) as tar:
        assert {"oci-layout", "index.json"} <= set(tar.getnames())


@pytest.mark.parametrize(("architecture", "machine"), [("amd64", "x86_64"), ("arm64", "aarch64")])
def test_platform_tags_are_the_manylinux_ones_bookworms_glibc_runs(
    architecture: str, machine: str
) -> None:
    expected = [f"manylinux_2_{minor}_{machine}" for minor in range(36, 16, -1)]
    assert platform_tags(architecture) == [*expected, f"manylinux2014_{machine}"]
