"""`python -m imagebuild.release [--out DIR] [--helm PATH]`: everything an operator downloads,
in one folder (docs/install.md, "Release artifacts"; ./scripts/release is the way in).

    image/                                   OCI image layout: one image index (linux/amd64,
                                             linux/arm64), tagged VERSION
    graceful-drain-VERSION-image.oci.tar     the same layout as one archive
    graceful-drain-VERSION.sbom.linux-ARCH.cdx.json   CycloneDX SBOM of each platform image
    graceful-drain-VERSION.tgz               the Helm chart (helm package, times clamped)
    kubectl-graceful_drain-VERSION-OS-ARCH.tar.gz   the kubectl plugin for linux and darwin,
                                             amd64 and arm64: one file (a PEX, CPython
                                             3.11-3.13) and its completion executable
                                             (kubectl 1.26+), as krew installs them
    graceful-drain.krew.yaml                 the krew manifest (the archive's sha256)
    cosign.pub                               the public key of the release's signatures
    graceful-drain-VERSION.tgz.sig           the chart's signature (cosign sign-blob)
    CHANGELOG.md, SHA256SUMS (every file, image/ included), SHA256SUMS.sig

image/ also holds, as OCI 1.1 referrers listed after the tagged image index in index.json,
each SBOM (of its platform manifest) and a cosign signature of the index, of each platform
manifest and of each SBOM (imagebuild/signing.py).

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
from imagebuild.signing import (
    PASSWORD_VARIABLE,
    PUBLIC_KEY,
    SIGNATURE_SUFFIX,
    SIGNING_KEY_VARIABLE,
    Signer,
    add_sbom_referrer,
    sign_layout,
)
from imagebuild.spec import (
    DEBIAN_SUITE,
    LOCK,
    PYTHON_MINOR,
    REPO,
    REPOSITORY,
    VENV,
)
from imagebuild.venv import build_wheel, ensure_wheels

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
PEX_TIMEOUT_SECONDS = 600


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


# Where the kubectl plugin runs, each with CPython 3.11, 3.12 and 3.13 (docs/install.md,
# "The kubectl plugin").
# Not darwin/amd64: cryptography 50.0.2 (the lock's) publishes no Intel macOS wheel, and the
# plugin is never built from an sdist (--no-build).
PLUGIN_PLATFORMS = (("linux", "amd64"), ("linux", "arm64"), ("darwin", "arm64"))
PLUGIN_PYTHONS = ("3.11", "3.12", "3.13")
# The oldest systems the plugin's wheels are chosen for: glibc 2.28 (RHEL 8, Debian 10,
# Ubuntu 20.04) and macOS 11.
PLUGIN_GLIBC_MINOR = 28
PLUGIN_MACOS = (11, 0)


def plugin_platform(system: str, architecture: str, python: str) -> oci.Json:
    """A pex --complete-platform document: CPython `python` on `system`/`architecture`,
    with every wheel tag such a system accepts (manylinux down to 2.17; macOS down to
    10.9, universal2 included)."""
    major, minor = (int(part) for part in python.split("."))
    machine = _MACHINES[architecture]
    if system == "linux":
        platforms = [*(f"manylinux_2_{glibc}_{machine}"
                       for glibc in range(PLUGIN_GLIBC_MINOR, 16, -1)),
                     f"manylinux2014_{machine}"]  # fmt: skip
        marker_machine, marker_system, sys_platform = machine, "Linux", "linux"
    else:
        mac_arch = "x86_64" if architecture == "amd64" else "arm64"
        platforms = list(tags.mac_platforms(PLUGIN_MACOS, mac_arch))
        marker_machine, marker_system, sys_platform = mac_arch, "Darwin", "darwin"
    interpreter = f"cp{major}{minor}"
    compatible = [
        *tags.cpython_tags((major, minor), abis=[interpreter, "abi3", "none"],
                           platforms=platforms),
        *tags.compatible_tags((major, minor), interpreter=interpreter, platforms=platforms),
    ]  # fmt: skip
    return {
        "marker_environment": {
            "implementation_name": "cpython", "implementation_version": f"{python}.0",
            "os_name": "posix", "platform_machine": marker_machine,
            "platform_python_implementation": "CPython", "platform_release": "",
            "platform_system": marker_system, "platform_version": "",
            "python_full_version": f"{python}.0", "python_version": python,
            "sys_platform": sys_platform,
        },
        "compatible_tags": [str(tag) for tag in compatible],
    }  # fmt: skip


def locked_pins() -> list[str]:
    """The lock's `name==version` lines, without their hashes."""
    return [
        line.split()[0] for line in LOCK.read_text().splitlines()
        if line and not line[0].isspace() and not line.startswith("#")
    ]  # fmt: skip


def plugin_name(system: str, architecture: str) -> str:
    return f"{system}-{architecture}"


def build_plugin(directory: Path, wheel: Path, system: str, architecture: str,
                 epoch: int) -> Path:  # fmt: skip
    """The plugin for one (os, arch), one file (a PEX) holding the locked distributions'
    wheels for CPython 3.11, 3.12 and 3.13 there, from PyPI (pex's cache under the cache
    root keeps them); it runs under whichever python3 is on PATH."""
    plugin = directory / PLUGIN
    with tempfile.TemporaryDirectory(prefix="pex-", dir=cache_root()) as tmp:
        options = []
        for python in PLUGIN_PYTHONS:
            file = Path(tmp) / f"{python}.json"
            file.write_text(json.dumps(plugin_platform(system, architecture, python)))
            options += ["--complete-platform", str(file)]
        # Every pin of the lock named (not only graceful-drain's wheel): pex's resolve for
        # another platform left out what an extra of a dependency pulls in (httpx2[http2]).
        pins = Path(tmp) / "pins.txt"
        pins.write_text("".join(f"{pin}\n" for pin in locked_pins()))
        command = [
            str(Path(sys.executable).parent / "pex"), "--requirement", str(pins),
            f"--find-links={wheel.parent}", "--no-build", *options, str(wheel),
            "--entry-point", "graceful_drain.cli:kubectl_plugin_main",
            # One virtualenv (under ~/.cache/pex, made on first run): lightkube and
            # lightkube-models share the `lightkube` package, which pex's default layout
            # (a sys.path entry per wheel) splits, and so do symlinked site-packages.
            "--venv", "--venv-site-packages-copies",
            "--python-shebang", "/usr/bin/env python3",
            "--pex-root", str(cache_root() / "pex-root"), "--output-file", str(plugin),
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


def plugin_archive(out: Path, version: str, system: str, architecture: str) -> Path:
    return out / f"{PLUGIN}-{version}-{plugin_name(system, architecture)}.tar.gz"


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


def krew_manifest(version: str, archives: dict[tuple[str, str], Path]) -> str:
    """The krew plugin manifest: one platform per (os, arch) archive, with its sha256 (krew
    installs from a .tar.gz; each holds the plugin and its completion executable)."""
    platforms = "".join(
        f"""  - selector:
      matchLabels:
        os: {system}
        arch: {architecture}
    uri: {PROJECT_URL}/releases/download/v{version}/{archive.name}
    sha256: {sha256(archive)}
    bin: {PLUGIN}
    files:
      - from: {PLUGIN}
        to: .
      - from: {PLUGIN_COMPLETION}
        to: .
"""
        for (system, architecture), archive in archives.items()
    )
    pythons = ", ".join(PLUGIN_PYTHONS)
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
    Needs python3 ({pythons}) on the PATH; Linux (glibc 2.28+) and macOS 11+, amd64
    and arm64.
  platforms:
{platforms}"""


# -- the whole release --


def _architectures() -> tuple[str, str]:
    native = host_architecture()
    if native not in ARCHITECTURES:
        raise ImageUnavailable(f"releases are built on amd64 or arm64, not {native}")
    [foreign] = [a for a in ARCHITECTURES if a != native]
    return native, foreign


def is_current(out: Path = OUT, public_key: str | None = None) -> bool:
    """Whether `out` holds the release of this checkout (release.key matches), signed by
    the key whose public half is `public_key` (None: by any)."""
    key_file = out / "release.key"
    native, foreign = _architectures()
    key = release_key(native, foreign, source_date_epoch())
    signed_by = out / PUBLIC_KEY
    return (
        key_file.is_file() and key_file.read_text().strip() == key
        and (public_key is None or (signed_by.is_file() and signed_by.read_text() == public_key))
    )  # fmt: skip


def release(out: Path, helm: str, signer: Signer, bin_dir: Path) -> Path:
    """The release in `out`, signed by `signer` (imagebuild/signing.py); `bin_dir` holds
    realcluster/build's binaries (the loopback registry the signing pushes to)."""
    version, epoch = project_version(), source_date_epoch()
    native, foreign = _architectures()
    changelog_notes(version)
    public_key = signer.public_key()
    if is_current(out, public_key):
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
        image_entry = {
            **index.json(),
            "annotations": {oci.REF_NAME: version, oci.CONTAINERD_NAME: f"{REPOSITORY}:{version}"},
        }  # fmt: skip
        layout.write_index([image_entry])
        wheel = build_wheel(Path(tmp), epoch)
        sboms: list[oci.Descriptor] = []
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
        for architecture in ARCHITECTURES:
            sbom = out / f"graceful-drain-{version}.sbom.linux-{architecture}.cdx.json"
            write_sbom(
                sbom, architecture=architecture, version=version,
                manifest_digest=manifests[architecture].digest, epoch=epoch,
                rootfs_tarball=rootfs[architecture], wheels=wheels[architecture], wheel=wheel,
            )  # fmt: skip
            sboms.append(add_sbom_referrer(layout, manifests[architecture], sbom, created))
        print("release: signing the image index, its platforms and SBOMs...", file=sys.stderr)
        platforms = [manifests[a].digest for a in ARCHITECTURES]
        referrers = sign_layout(
            signer, layout.path, [index.digest, *platforms, *(d.digest for d in sboms)],
            [index.digest, *platforms], bin_dir,
        )  # fmt: skip
        layout.write_index([image_entry, *referrers])
        oci.write_archive(layout.path, out / f"graceful-drain-{version}-image.oci.tar", epoch)
        archives: dict[tuple[str, str], Path] = {}
        for system, architecture in PLUGIN_PLATFORMS:
            print(f"release: the kubectl plugin for {system}/{architecture} (pex)...",
                  file=sys.stderr)  # fmt: skip
            directory = Path(tmp) / "plugin" / plugin_name(system, architecture)
            directory.mkdir(parents=True)
            plugin = build_plugin(directory, wheel, system, architecture, epoch)
            completion = directory / PLUGIN_COMPLETION
            completion.write_text(PLUGIN_COMPLETION_SCRIPT)
            completion.chmod(0o755)
            archive = plugin_archive(out, version, system, architecture)
            tar_gz(archive, [plugin, completion], epoch)
            archives[(system, architecture)] = archive
    (out / "graceful-drain.krew.yaml").write_text(krew_manifest(version, archives))
    result = subprocess.run(
        [helm, "package", str(CHART), "--version", version, "--app-version", version,
         "--destination", str(out)],
        stdout=sys.stderr, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise ImageUnavailable(f"helm package exited {result.returncode}")
    clamp_chart_times(out / f"graceful-drain-{version}.tgz", epoch)
    shutil.copy2(CHANGELOG, out / "CHANGELOG.md")
    (out / PUBLIC_KEY).write_text(public_key)
    signer.sign_blob(out / f"graceful-drain-{version}.tgz")
    write_sums(out)
    signer.sign_blob(out / "SHA256SUMS")
    key_file.write_text(key + "\n")
    return out


def summed_files(out: Path) -> list[Path]:
    """What SHA256SUMS covers: every file of the folder, image/ included, but itself, its
    signature and release.key."""
    skipped = {"SHA256SUMS", "SHA256SUMS" + SIGNATURE_SUFFIX, "release.key"}
    return sorted(p for p in out.rglob("*") if p.is_file()
                  and p.relative_to(out).as_posix() not in skipped)  # fmt: skip


def write_sums(out: Path) -> None:
    """SHA256SUMS: `sha256sum -c SHA256SUMS` in the folder checks every file."""
    (out / "SHA256SUMS").write_text(
        "".join(f"{sha256(p)}  {p.relative_to(out).as_posix()}\n" for p in summed_files(out))
    )


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
    parser.add_argument(
        "--bin-dir", type=Path, required=True,
        help="realcluster/build's binaries: cosign, and the registry the signing pushes to",
    )  # fmt: skip
    parser.add_argument(
        "--signing-key", type=Path, default=os.environ.get(SIGNING_KEY_VARIABLE),
        help="the cosign private key that signs the release (cosign generate-key-pair; its "
        f"password in ${PASSWORD_VARIABLE}) [env {SIGNING_KEY_VARIABLE}]",
    )  # fmt: skip
    args = parser.parse_args()
    if args.signing_key is None or not args.signing_key.is_file():
        parser.error(f"--signing-key (or ${SIGNING_KEY_VARIABLE}) must name a cosign.key file "
                     f"(cosign generate-key-pair), not {args.signing_key}")  # fmt: skip
    start = time.monotonic()
    try:
        signer = Signer(args.bin_dir / "cosign", args.signing_key)
        out = release(args.out.resolve(), args.helm, signer, args.bin_dir)
    except ImageUnavailable as error:
        print(f"release: error: {error}", file=sys.stderr)
        return 2
    print(f"release: graceful-drain {project_version()} in {out} "
          f"({time.monotonic() - start:.0f} s)", file=sys.stderr)  # fmt: skip
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
