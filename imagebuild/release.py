"""`python -m imagebuild.release [--out DIR] [--helm PATH]`: everything an operator downloads,
in one folder (docs/install.md, "Release artifacts"; ./scripts/release is the way in).

    image/                                   OCI image layout: one image index (linux/amd64,
                                             linux/arm64), tagged VERSION
    graceful-drain-VERSION-image.oci.tar     the same layout as one archive
    graceful-drain-VERSION.sbom.linux-ARCH.cdx.json   CycloneDX SBOM of each platform image
    graceful-drain-VERSION.tgz               the Helm chart (helm package, times clamped)
    kubectl-graceful_drain                   the kubectl plugin, one file (a PEX)
    kubectl_complete-graceful_drain          its completion executable (kubectl 1.26+)
    kubectl-graceful_drain-VERSION.tar.gz    both, as krew installs them
    graceful-drain.krew.yaml                 the krew manifest (the archive's sha256)
    CHANGELOG.md, SHA256SUMS

Reused while release.key (a digest of everything that goes in) matches.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

from packaging import tags

from imagebuild import oci
from imagebuild.build import (
    DIST,
    ensure_built,
    image_config,
    image_key,
    project_version,
    source_date_epoch,
)
from imagebuild.cache import cache_root, digest, tree_digest
from imagebuild.foreign import ELF_MACHINES, elf_machine, ensure_foreign_rootfs, foreign_key
from imagebuild.rootfs import ImageUnavailable, ensure_rootfs, host_architecture
from imagebuild.sbom import normalise, write_sbom
from imagebuild.spec import (
    DEBIAN_SUITE,
    LOCK,
    PYTHON_MINOR,
    REPO,
    REPOSITORY,
    VENV,
)
from imagebuild.venv import build_wheel, ensure_wheels, platform_tags

OUT = DIST / "release"
CHART = REPO / "charts" / "graceful-drain"
CHANGELOG = REPO / "CHANGELOG.md"
PLUGIN = "kubectl-graceful_drain"
# kubectl's plugin completion (kubectl >= 1.26): an executable of this name on PATH.
PLUGIN_COMPLETION = "kubectl_complete-graceful_drain"
PLUGIN_COMPLETION_SCRIPT = f"""#!/bin/sh
# kubectl (1.26+) runs this for `kubectl graceful-drain ...<TAB>`: put it on PATH beside
# {PLUGIN} (docs/cli.md, "The kubectl plugin and shell completion").
exec {PLUGIN} __complete "$@"
"""
ARCHITECTURES = ("amd64", "arm64")
_VARIANTS = {"arm64": "v8"}
_MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}
PROJECT_URL = "https://github.com/stonal/graceful-drain"
PEX_TIMEOUT_SECONDS = 300


def platform(architecture: str) -> oci.Json:
    variant = _VARIANTS.get(architecture)
    return {
        "architecture": architecture,
        "os": "linux",
        **({"variant": variant} if variant else {}),
    }


def release_key(native: str, foreign: str, epoch: int) -> str:
    builder = sorted(Path(__file__).parent.glob("*.py"))
    return digest([
        image_key(native, epoch), foreign_key(native, foreign), CHANGELOG.read_bytes(),
        tree_digest(REPO, ["charts/graceful-drain"]), *(p.read_bytes() for p in builder),
    ])  # fmt: skip


def changelog_notes(version: str) -> str:
    """The CHANGELOG.md section of `version` (a release without one is refused)."""
    text = CHANGELOG.read_text()
    match = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if match is None:
        raise ImageUnavailable(f"CHANGELOG.md has no '## [{version}]' section: write it first")
    return match.group(1).strip()


# -- the foreign image's virtualenv: the native one, its platform distributions replaced --


def _site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{PYTHON_MINOR}" / "site-packages"


def replace_platform_distributions(venv: Path, wheels: Path) -> list[str]:
    """Swap every non-pure distribution of the native virtualenv `venv` for the same version's
    wheel in `wheels` (the foreign architecture's); the names replaced."""
    site = _site_packages(venv)
    replaced = []
    for info in sorted(site.glob("*.dist-info")):
        if "Root-Is-Purelib: true" in (info / "WHEEL").read_text():
            continue
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        [wheel] = [w for w in wheels.glob("*.whl")
                   if normalise(w.name.split("-")[0]) == normalise(name)
                   and w.name.split("-")[1] == version]  # fmt: skip
        installer_files = {}
        for extra in ("INSTALLER", "REQUESTED"):
            if (info / extra).is_file():
                installer_files[extra] = (info / extra).read_bytes()
        for line in (info / "RECORD").read_text().splitlines():
            path = (site / line.split(",")[0]).resolve()
            path.unlink(missing_ok=True)
            if path.suffix == ".py":
                for pyc in path.parent.glob(f"__pycache__/{path.stem}.*.pyc"):
                    pyc.unlink()
        shutil.rmtree(info, ignore_errors=True)
        compiled = []
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                if member.is_dir():
                    continue
                if ".data/" in member.filename.split("/", 1)[0] + "/":
                    raise ImageUnavailable(f"{wheel.name}: .data entries are not handled")
                target = site / member.filename
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
                mode = (member.external_attr >> 16) & 0o777
                target.chmod(mode or 0o644)
                if target.suffix == ".py":
                    compiled.append(target)
        [new_info] = [
            p
            for p in site.glob("*.dist-info")
            if normalise(p.name.removesuffix(".dist-info").rsplit("-", 1)[0]) == normalise(name)
        ]
        record = (new_info / "RECORD").read_text()
        for extra, data in installer_files.items():
            (new_info / extra).write_bytes(data)
            record += f"{new_info.name}/{extra},sha256=,{len(data)}\n"
        (new_info / "RECORD").write_text(record)
        compile_in_image(Path(str(venv).removesuffix(VENV)), compiled)
        replaced.append(name)
    return replaced


_COMPILE = """\
import py_compile, sys
root = sys.argv[1]
for source in sys.argv[2:]:
    py_compile.compile(source, dfile=source[len(root):], doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
"""


def compile_in_image(stage_root: Path, files: list[Path]) -> None:
    """Bytecode for `files` (below `stage_root`, the image's /) as install-venv compiles it:
    hash-based and never re-checked, PYTHONHASHSEED=0 (set constants are marshalled in hash
    order), and the file names the image's paths (tracebacks, reproducibility)."""
    if not files:
        return
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    command = [sys.executable, "-c", _COMPILE, str(stage_root), *map(str, files)]
    if subprocess.run(command, env=env, check=False).returncode != 0:
        raise ImageUnavailable("compiling the foreign wheels' bytecode failed")


def check_elf(root: Path, architecture: str) -> None:
    wrong = [
        str(p.relative_to(root)) for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
        and elf_machine(p) not in (None, ELF_MACHINES[architecture])
    ]  # fmt: skip
    if wrong:
        raise ImageUnavailable(f"ELF files of another architecture in {architecture}: {wrong[:10]}")


# -- the kubectl plugin: one PEX for both Linux architectures --


def complete_platform(architecture: str, path: Path) -> None:
    """A pex --complete-platform file: the image's Python (cp311) on glibc 2.36."""
    major, minor = (int(part) for part in PYTHON_MINOR.split("."))
    platforms = platform_tags(architecture)
    compatible = [
        *tags.cpython_tags((major, minor), abis=[f"cp{major}{minor}", "abi3", "none"],
                           platforms=platforms),
        *tags.compatible_tags((major, minor), interpreter=f"cp{major}{minor}",
                              platforms=platforms),
    ]  # fmt: skip
    machine = _MACHINES[architecture]
    path.write_text(json.dumps({
        "marker_environment": {
            "implementation_name": "cpython", "implementation_version": f"{PYTHON_MINOR}.0",
            "os_name": "posix", "platform_machine": machine,
            "platform_python_implementation": "CPython", "platform_release": "",
            "platform_system": "Linux", "platform_version": "", "python_full_version":
            f"{PYTHON_MINOR}.0", "python_version": PYTHON_MINOR, "sys_platform": "linux",
        },
        "compatible_tags": [str(tag) for tag in compatible],
    }))  # fmt: skip


def locked_pins() -> list[str]:
    """The lock's `name==version` lines, without their hashes."""
    return [
        line.split()[0] for line in LOCK.read_text().splitlines()
        if line and not line[0].isspace() and not line.startswith("#")
    ]  # fmt: skip


def build_plugin(out: Path, wheel: Path, wheel_dirs: list[Path], epoch: int) -> Path:
    plugin = out / PLUGIN
    with tempfile.TemporaryDirectory(prefix="pex-", dir=cache_root()) as tmp:
        options = []
        for architecture in ARCHITECTURES:
            file = Path(tmp) / f"{architecture}.json"
            complete_platform(architecture, file)
            options += ["--complete-platform", str(file)]
        # Every pin of the lock named (not only graceful-drain's wheel): pex's resolve for
        # another platform left out what an extra of a dependency pulls in (httpx2[http2]).
        pins = Path(tmp) / "pins.txt"
        pins.write_text("".join(f"{pin}\n" for pin in locked_pins()))
        command = [
            str(Path(sys.executable).parent / "pex"), "--no-pypi", "--requirement", str(pins),
            *(f"--find-links={d}" for d in [*wheel_dirs, wheel.parent]),
            *options, str(wheel), "--entry-point", "graceful_drain.cli:kubectl_plugin_main",
            # One virtualenv (under ~/.cache/pex, made on first run): lightkube and
            # lightkube-models share the `lightkube` package, which pex's default layout
            # (a sys.path entry per wheel) splits, and so do symlinked site-packages.
            "--venv", "--venv-site-packages-copies",
            "--python-shebang", "/usr/bin/env python3", "--pex-root", str(Path(tmp) / "root"),
            "--output-file", str(plugin),
        ]  # fmt: skip
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
        try:
            # Bounded: once (2026-12-06) a pex run made no progress for 25 minutes where it
            # takes 10 to 20 s; a hang fails the release in minutes rather than CI's hour.
            result = subprocess.run(
                command, env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr, check=False,
                timeout=PEX_TIMEOUT_SECONDS,
            )  # fmt: skip
        except subprocess.TimeoutExpired as error:
            raise ImageUnavailable(
                f"pex made no plugin within {PEX_TIMEOUT_SECONDS} s: {' '.join(command)}"
            ) from error
        if result.returncode != 0:
            raise ImageUnavailable(f"pex exited {result.returncode}: {' '.join(command)}")
    return plugin


def tar_gz(archive: Path, files: list[Path], epoch: int) -> None:
    """A reproducible .tar.gz of `files` (flat, root-owned, times clamped)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for file in files:
            info = tar.gettarinfo(str(file), file.name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            with file.open("rb") as data:
                tar.addfile(info, data)
    with archive.open("wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as gz:
        gz.write(buffer.getvalue())


def clamp_chart_times(archive: Path, epoch: int) -> None:
    """`helm package` stamps each entry of the chart's archive with the time it ran, so the
    same chart made twice differs. Rewrite `archive` with every entry's time set to `epoch`
    (and root-owned), in helm's order, behind helm's own gzip header (its Extra field and
    comment "Helm", no timestamp): the same chart is then the same bytes on every build."""
    packed = archive.read_bytes()
    header = packed[: _gzip_header_length(packed)]
    source, clamped = io.BytesIO(gzip.decompress(packed)), io.BytesIO()
    with (
        tarfile.open(fileobj=source) as tar,
        tarfile.open(fileobj=clamped, mode="w", format=tarfile.PAX_FORMAT) as out,
    ):
        for member in tar.getmembers():
            member.mtime, member.uid, member.gid, member.uname, member.gname = epoch, 0, 0, "", ""
            member.pax_headers = {}
            out.addfile(member, tar.extractfile(member) if member.isfile() else None)
    data = clamped.getvalue()
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(data) + deflate.flush()
    trailer = zlib.crc32(data).to_bytes(4, "little") + (len(data) & 0xFFFFFFFF).to_bytes(
        4, "little"
    )
    archive.write_bytes(header + body + trailer)


def _gzip_header_length(packed: bytes) -> int:
    """The length of a gzip member's header (RFC 1952, 2.3.1)."""
    if packed[:3] != b"\x1f\x8b\x08":
        raise ImageUnavailable("helm package did not write a gzip (deflate) archive")
    flags, at = packed[3], 10
    if flags & 0x04:  # FEXTRA
        at += 2 + int.from_bytes(packed[at : at + 2], "little")
    for field in (0x08, 0x10):  # FNAME, FCOMMENT: zero-terminated
        if flags & field:
            at = packed.index(b"\0", at) + 1
    if flags & 0x02:  # FHCRC
        at += 2
    return at


def sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def krew_manifest(version: str, archive: Path) -> str:
    """The krew plugin manifest (krew installs from a .tar.gz or .zip, so its sha256 is the
    archive's; the archive holds the plugin file byte for byte)."""
    url = f"{PROJECT_URL}/releases/download/v{version}/{archive.name}"
    platforms = "".join(
        f"""  - selector:
      matchLabels:
        os: linux
        arch: {architecture}
    uri: {url}
    sha256: {sha256(archive)}
    bin: {PLUGIN}
    files:
      - from: {PLUGIN}
        to: .
      - from: {PLUGIN_COMPLETION}
        to: .
"""
        for architecture in ARCHITECTURES
    )
    return f"""apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: graceful-drain
spec:
  version: v{version}
  homepage: {PROJECT_URL}
  shortDescription: Plan and watch node drains that keep a Deployment's last Ready pod
  description: |
    kubectl graceful-drain plan NODE tells, before you drain NODE, which pods the
    graceful-drain webhook will hold and why; status shows what it is holding now.
    Needs python3 (3.11) on the PATH; one file for linux/amd64 and linux/arm64.
  platforms:
{platforms}"""


# -- the whole release --


def _architectures() -> tuple[str, str]:
    native = host_architecture()
    if native not in ARCHITECTURES:
        raise ImageUnavailable(f"releases are built on amd64 or arm64, not {native}")
    [foreign] = [a for a in ARCHITECTURES if a != native]
    return native, foreign


def is_current(out: Path = OUT) -> bool:
    """Whether `out` holds the release of this checkout (release.key matches)."""
    key_file = out / "release.key"
    native, foreign = _architectures()
    key = release_key(native, foreign, source_date_epoch())
    return key_file.is_file() and key_file.read_text().strip() == key


def release(out: Path, helm: str) -> Path:
    version, epoch = project_version(), source_date_epoch()
    native, foreign = _architectures()
    changelog_notes(version)
    if is_current(out):
        return out
    key = release_key(native, foreign, epoch)
    key_file = out / "release.key"
    if out.exists() and any(out.iterdir()) and not key_file.is_file():
        raise ImageUnavailable(f"{out} is not empty and holds no earlier release: not replacing it")
    native_image = ensure_built()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    key_file.write_text("")  # ours, though unfinished until the key is written at the end
    native_rootfs = ensure_rootfs(native, epoch)
    foreign_rootfs = ensure_foreign_rootfs(native_rootfs, native, foreign, epoch)
    wheels = {native: ensure_wheels(native), foreign: ensure_wheels(foreign)}
    rootfs = {native: native_rootfs, foreign: foreign_rootfs}
    layout = oci.Layout(out / "image", epoch)
    manifests: dict[str, oci.Descriptor] = {}
    # The native image is the one scripts/build-image made: its blobs, as they are.
    native_manifest, _ = oci.read_index(native_image.layout)
    [entry] = json.loads((native_image.layout / "index.json").read_text())["manifests"]
    for descriptor in [entry, native_manifest["config"], *native_manifest["layers"]]:
        layout.add_blob(native_image.layout / "blobs" / "sha256"
                        / descriptor["digest"].removeprefix("sha256:"))  # fmt: skip
    manifests[native] = oci.Descriptor(oci.MANIFEST_TYPE, entry["digest"], entry["size"])
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="release-", dir=cache_root()) as tmp:
        stage = Path(tmp) / "stage"
        stage.mkdir()
        app_layer = native_manifest["layers"][-1]["digest"].removeprefix("sha256:")
        with tarfile.open(native_image.layout / "blobs" / "sha256" / app_layer) as tar:
            tar.extractall(stage, numeric_owner=True, filter="fully_trusted")
        venv = stage / VENV.lstrip("/")
        replaced = replace_platform_distributions(venv, wheels[foreign])
        check_elf(stage, foreign)
        print(f"release: {foreign} wheels for {', '.join(replaced)}", file=sys.stderr)
        print(f"release: writing the {foreign} image's layers...", file=sys.stderr)
        base = layout.add_layer(
            f"Debian {DEBIAN_SUITE} {foreign}: the {native} image's packages, unpacked "
            "without running them (imagebuild/foreign.py)",
            oci.copy_tar(layout, foreign_rootfs, keep=lambda name: not name.startswith("dev/")),
        )
        app = layout.add_layer(
            f"{VENV}: the {native} image's, its platform wheels for {foreign} "
            f"({LOCK.relative_to(REPO)})",
            oci.copy_tree(layout, stage, VENV.lstrip("/")),
        )
        config = {**image_config(foreign, epoch, version), **platform(foreign)}
        manifests[foreign] = layout.add_image(config, [base, app])
        index = layout.add_json(oci.INDEX_TYPE, {
            "schemaVersion": 2, "mediaType": oci.INDEX_TYPE,
            "manifests": [{**manifests[a].json(), "platform": platform(a)}
                          for a in ARCHITECTURES],
            "annotations": {"org.opencontainers.image.version": version},
        })  # fmt: skip
        layout.write_index([{
            **index.json(),
            "annotations": {oci.REF_NAME: version, oci.CONTAINERD_NAME: f"{REPOSITORY}:{version}"},
        }])  # fmt: skip
        oci.write_archive(layout.path, out / f"graceful-drain-{version}-image.oci.tar", epoch)
        wheel = build_wheel(Path(tmp), epoch)
        for architecture in ARCHITECTURES:
            write_sbom(
                out / f"graceful-drain-{version}.sbom.linux-{architecture}.cdx.json",
                architecture=architecture, version=version,
                manifest_digest=manifests[architecture].digest, epoch=epoch,
                rootfs_tarball=rootfs[architecture], wheels=wheels[architecture], wheel=wheel,
            )  # fmt: skip
        print("release: the kubectl plugin (pex)...", file=sys.stderr)
        plugin = build_plugin(out, wheel, [wheels[a] for a in ARCHITECTURES], epoch)
    completion = out / PLUGIN_COMPLETION
    completion.write_text(PLUGIN_COMPLETION_SCRIPT)
    completion.chmod(0o755)
    archive = out / f"{PLUGIN}-{version}.tar.gz"
    tar_gz(archive, [plugin, completion], epoch)
    (out / "graceful-drain.krew.yaml").write_text(krew_manifest(version, archive))
    result = subprocess.run(
        [helm, "package", str(CHART), "--version", version, "--app-version", version,
         "--destination", str(out)],
        stdout=sys.stderr, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise ImageUnavailable(f"helm package exited {result.returncode}")
    clamp_chart_times(out / f"graceful-drain-{version}.tgz", epoch)
    shutil.copy2(CHANGELOG, out / "CHANGELOG.md")
    files = sorted(p for p in out.iterdir() if p.is_file() and p.name != "release.key")
    (out / "SHA256SUMS").write_text("".join(f"{sha256(p)}  {p.name}\n" for p in files))
    key_file.write_text(key + "\n")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/release",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=OUT, help="the folder (default dist/release)")
    parser.add_argument(
        "--helm", default=shutil.which("helm") or "helm", help="helm to package with"
    )
    args = parser.parse_args()
    start = time.monotonic()
    try:
        out = release(args.out.resolve(), args.helm)
    except ImageUnavailable as error:
        print(f"release: error: {error}", file=sys.stderr)
        return 2
    print(f"release: graceful-drain {project_version()} in {out} "
          f"({time.monotonic() - start:.0f} s)", file=sys.stderr)  # fmt: skip
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
