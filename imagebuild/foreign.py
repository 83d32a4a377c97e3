"""The root filesystem for a foreign architecture (arm64 on an amd64 machine), made without
running any of its programs: no qemu, no maintainer scripts (docs/image.md, "Two
architectures").

The native root filesystem (rootfs.py: mmdebstrap, maintainer scripts run) is the template:
its configured state (passwd, alternatives, the dpkg database) is what the same packages'
scripts write on any architecture. Every file of every architecture-specific package is
taken out of it and the same package of the foreign architecture (the same version where
Debian still serves it) is unpacked in its place, honouring the dpkg path filters and
diversions; the dpkg database is rewritten from the foreign packages' control data.
Architecture-independent packages (`Architecture: all`) stay as they are. The foreign
packages are downloaded by apt (signature-checked indexes, checksum-checked packages) and
cached; the grafted root filesystem is cached as a tarball beside the native one.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from imagebuild.cache import cache_root, digest
from imagebuild.rootfs import ImageUnavailable, rootfs_key
from imagebuild.spec import DEBIAN_SUITE, DPKG_PATH_FILTERS

# The ELF e_machine of each Debian architecture this project builds.
ELF_MACHINES = {"amd64": 62, "arm64": 183}  # EM_X86_64, EM_AARCH64
MULTIARCH = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
# What maintainer scripts (ldconfig) generated for the native architecture's libraries; the
# foreign dynamic loader searches its multiarch directories without it.
_NATIVE_CACHES = ("etc/ld.so.cache", "var/cache/ldconfig/aux-cache")
_DPKG = "var/lib/dpkg"


@dataclass
class Stanza:
    """One paragraph of a dpkg control file: its fields in order (values keep their
    continuation lines)."""

    fields: list[tuple[str, str]]

    def get(self, name: str, default: str = "") -> str:
        for key, value in self.fields:
            if key.lower() == name.lower():
                return value.strip()
        return default

    def render(self) -> str:
        return "".join(f"{key}:{value if value.startswith(chr(10)) else ' ' + value}\n"
                       for key, value in self.fields)  # fmt: skip


def parse_control(text: str) -> list[Stanza]:
    """The paragraphs of a dpkg status or control file."""
    stanzas: list[Stanza] = []
    fields: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            if fields:
                stanzas.append(Stanza(fields))
            fields = []
        elif line[0] in " \t":
            key, value = fields[-1]
            fields[-1] = (key, f"{value}\n{line}")
        else:
            key, _, value = line.partition(":")
            fields.append((key, value.strip()))
    if fields:
        stanzas.append(Stanza(fields))
    return stanzas


def elf_machine(path: Path) -> int | None:
    """The ELF e_machine of the file at `path`, None when it is not an ELF file."""
    with path.open("rb") as file:
        header = file.read(20)
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    return int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")


def _filtered_out(path: str) -> bool:
    """Whether dpkg's path filters (spec.DPKG_PATH_FILTERS; the last match decides) leave the
    absolute `path` out."""
    excluded = False
    for option in DPKG_PATH_FILTERS:
        kind, _, pattern = option.partition("=")
        if fnmatch.fnmatchcase(path, pattern):
            excluded = kind == "path-exclude"
    return excluded


class Root:
    """A root filesystem on disk, with paths resolved through its own symlinks (merged /usr:
    /bin -> usr/bin) the way they would be inside it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def resolve(self, name: str) -> Path:
        """The host path of `name` inside the root, every component but the last followed
        through symlinks (absolute ones relative to the root)."""
        parts = [part for part in name.strip("/").split("/") if part not in ("", ".")]
        current: list[str] = []
        for index, part in enumerate(parts):
            candidate = self.path.joinpath(*current, part)
            if index < len(parts) - 1 and candidate.is_symlink():
                target = os.readlink(candidate)
                base = [] if target.startswith("/") else current
                current = self._normal([*base, *target.split("/")])
            elif part == "..":
                current = current[:-1]
            else:
                current.append(part)
        return self.path.joinpath(*current)

    def _normal(self, parts: list[str]) -> list[str]:
        resolved = self.resolve("/".join(parts))
        return list(resolved.relative_to(self.path).parts)


def _diversions(root: Path) -> dict[str, tuple[str, str]]:
    """dpkg's diversions: diverted path -> (where it goes, the package that diverts it)."""
    file = root / _DPKG / "diversions"
    lines = file.read_text().splitlines() if file.is_file() else []
    return {lines[i]: (lines[i + 1], lines[i + 2]) for i in range(0, len(lines) - 2, 3)}


def _diverted(path: str, package: str, diversions: dict[str, tuple[str, str]]) -> str:
    target = diversions.get(path)
    return target[0] if target is not None and target[1] != package else path


def _info_name(stanza: Stanza) -> str:
    """A package's name in /var/lib/dpkg/info (Multi-Arch: same ones carry the arch)."""
    package = stanza.get("Package")
    if stanza.get("Multi-Arch") == "same":
        return f"{package}:{stanza.get('Architecture')}"
    return package


def _native_packages(root: Path) -> list[Stanza]:
    return parse_control((root / _DPKG / "status").read_text())


def _run(command: list[str], what: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(command, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise ImageUnavailable(f"{what} exited {result.returncode}: {' '.join(command)}")
    completed: subprocess.CompletedProcess[bytes] = result
    return completed


def ensure_debs(root: Path, native_key: str, architecture: str) -> Path:
    """The foreign architecture's packages matching the native root's architecture-specific
    ones, downloaded by apt from the native root's own apt sources (cached)."""
    wanted = [s for s in _native_packages(root) if s.get("Architecture") != "all"]
    debs = cache_root() / f"debs-{DEBIAN_SUITE}-{architecture}-{native_key}"
    if (debs / ".complete").is_file():
        return debs
    shutil.rmtree(debs, ignore_errors=True)
    debs.mkdir(parents=True)
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="apt-", dir=cache_root()) as tmp:
        apt = Path(tmp)
        for sub in ("lists/partial", "cache/archives/partial", "parts", "prefs"):
            (apt / sub).mkdir(parents=True)
        (apt / "status").touch()
        shutil.copy2(root / "etc/apt/sources.list", apt / "sources.list")
        (apt / "apt.conf").write_text(
            "\n".join([
                f'APT::Architecture "{architecture}";',
                f'APT::Architectures {{ "{architecture}"; }};',
                f'Dir::State "{apt}"; Dir::State::Lists "{apt}/lists";',
                f'Dir::State::status "{apt}/status"; Dir::Cache "{apt}/cache";',
                f'Dir::Etc::SourceList "{apt}/sources.list"; Dir::Etc::SourceParts "{apt}/parts";',
                f'Dir::Etc::Parts "{apt}/parts"; Dir::Etc::PreferencesParts "{apt}/prefs";',
                'Acquire::Languages "none";',
                'APT::Sandbox::User "root";',  # the cache is root's: no _apt user to drop to
            ]) + "\n"
        )  # fmt: skip
        env = {**os.environ, "APT_CONFIG": str(apt / "apt.conf"), "LC_ALL": "C"}
        print(f"image: downloading Debian's {architecture} packages ({len(wanted)})...",
              file=sys.stderr)  # fmt: skip
        _run(["apt-get", "-q", "update"], "apt-get update", env=env, stdout=sys.stderr)
        specs = []
        for stanza in wanted:
            name, version = stanza.get("Package"), stanza.get("Version")
            policy = subprocess.run(
                ["apt-cache", "show", f"{name}:{architecture}={version}"],
                env=env, capture_output=True, check=False,
            )  # fmt: skip
            if policy.returncode == 0:
                specs.append(f"{name}:{architecture}={version}")
            else:
                # Debian moved on since the native bootstrap: the foreign image takes the
                # current version; each image's SBOM says which it holds.
                print(f"image: {name} {version} is no longer served for {architecture}; "
                      "taking the current version", file=sys.stderr)  # fmt: skip
                specs.append(f"{name}:{architecture}")
        _run(["apt-get", "-q", "download", *specs], "apt-get download", env=env, cwd=debs,
             stdout=sys.stderr)  # fmt: skip
    (debs / ".complete").touch()
    return debs


def _members(deb: Path) -> Iterator[tuple[tarfile.TarInfo, tarfile.TarFile]]:
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE) as p:
        assert p.stdout is not None
        with tarfile.open(fileobj=p.stdout, mode="r|") as tar:
            for info in tar:
                yield info, tar
    if p.returncode != 0:
        raise ImageUnavailable(f"dpkg-deb --fsys-tarfile {deb} exited {p.returncode}")


def _unpack(
    root: Root, deb: Path, package: str, diversions: dict[str, tuple[str, str]]
) -> list[str]:
    """Unpack the data of `deb` into `root` as dpkg would (filters, diversions); the paths it
    ships, for its .list file."""
    listed = ["/."]
    for info, tar in _members(deb):
        name = "/" + info.name.removeprefix("./").rstrip("/")
        if name == "/":
            continue
        listed.append(name)
        if not info.isdir() and _filtered_out(name):
            continue
        target = root.resolve(_diverted(name, package, diversions))
        if info.isdir():
            if not target.exists():
                target.mkdir(parents=True)
                os.chown(target, info.uid, info.gid)
                target.chmod(info.mode)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        if info.issym():
            os.symlink(info.linkname, target)
            os.lchown(target, info.uid, info.gid)
        elif info.islnk():
            source = root.resolve(_diverted("/" + info.linkname.removeprefix("./"), package,
                                            diversions))  # fmt: skip
            os.link(source, target)
        elif info.isreg():
            data = tar.extractfile(info)
            assert data is not None
            with target.open("wb") as out:
                shutil.copyfileobj(data, out)
            os.chown(target, info.uid, info.gid)
            target.chmod(info.mode)
            os.utime(target, (info.mtime, info.mtime))
        else:
            raise ImageUnavailable(f"{deb.name}: unexpected entry {info.name} ({info.type!r})")
    return listed


def _control(deb: Path, into: Path) -> Stanza:
    shutil.rmtree(into, ignore_errors=True)
    _run(["dpkg-deb", "--control", str(deb), str(into)], f"dpkg-deb --control {deb.name}")
    [stanza] = parse_control((into / "control").read_text())
    return stanza


def graft(root_path: Path, debs: Path, native: str, architecture: str) -> None:
    """Turn the native root filesystem at `root_path` into `architecture`'s, in place."""
    root = Root(root_path)
    info_dir = root_path / _DPKG / "info"
    diversions = _diversions(root_path)
    stanzas = _native_packages(root_path)
    by_name = {}
    for deb in sorted(debs.glob("*.deb")):
        named = subprocess.run(["dpkg-deb", "--field", str(deb), "Package"],
                                capture_output=True, text=True, check=True)  # fmt: skip
        by_name[named.stdout.strip()] = deb
    specific = [s for s in stanzas if s.get("Architecture") != "all"]
    missing = sorted(s.get("Package") for s in specific if s.get("Package") not in by_name)
    if missing:
        raise ImageUnavailable(f"no {architecture} package downloaded for {', '.join(missing)}")
    # 1. the native architecture's files out.
    for stanza in specific:
        package = stanza.get("Package")
        listing = info_dir / f"{_info_name(stanza)}.list"
        lines = listing.read_text().splitlines() if listing.is_file() else []
        for line in lines:
            if line == "/.":
                continue
            path = root.resolve(_diverted(line, package, diversions))
            # A directory (merged /usr makes /bin, /lib... symlinks to one) stays.
            if not path.is_dir() and (path.is_symlink() or path.is_file()):
                path.unlink()
        for file in info_dir.iterdir():
            if file.name.rsplit(".", 1)[0] == _info_name(stanza):
                file.unlink()
    # The native architecture's own directories go once empty (its multiarch triplet's,
    # merged /usr's lib64 and the symlink to it); the rest are shared with the foreign
    # packages, which ship them again.
    for directory, _, _ in sorted(os.walk(root_path), key=lambda w: -len(w[0])):
        path = Path(directory)
        if MULTIARCH[native] not in directory and path.name != "lib64":
            continue
        for entry in path.iterdir():  # e.g. perl's 5.36 -> 5.36.0, made by its postinst
            if entry.is_symlink() and not entry.exists():
                entry.unlink()
        if not any(path.iterdir()):
            path.rmdir()
    for link in root_path.iterdir():
        if link.is_symlink() and not link.exists():
            link.unlink()
    for cache in _NATIVE_CACHES:
        (root_path / cache).unlink(missing_ok=True)
    # 2. the foreign packages in, and their records.
    status: list[Stanza] = []
    with tempfile.TemporaryDirectory(prefix="control-", dir=cache_root()) as tmp:
        for stanza in stanzas:
            if stanza.get("Architecture") == "all":
                status.append(stanza)
                continue
            deb = by_name[stanza.get("Package")]
            control = _control(deb, Path(tmp) / "control")
            listed = _unpack(root, deb, control.get("Package"), diversions)
            name = _info_name(control)
            (info_dir / f"{name}.list").write_text("\n".join(listed) + "\n")
            conffiles: list[str] = []
            for member in sorted(Path(tmp, "control").iterdir()):
                if member.name == "control":
                    continue
                shutil.copy2(member, info_dir / f"{name}.{member.name}")
                if member.name == "conffiles":
                    for line in member.read_text().split():
                        if line.startswith("/"):
                            data = root.resolve(line).read_bytes()
                            conffiles.append(f" {line} {hashlib.md5(data).hexdigest()}")
            fields = [f for f in control.fields if f[0] != "Description"]
            fields.insert(1, ("Status", "install ok installed"))
            if conffiles:
                fields.append(("Conffiles", "\n" + "\n".join(conffiles)))
            fields += [f for f in control.fields if f[0] == "Description"]
            status.append(Stanza(fields))
    (root_path / _DPKG / "status").write_text("\n".join(s.render() for s in status))
    (root_path / _DPKG / "arch").write_text(f"{architecture}\n")
    # Bytecode the native python3's postinst compiled for modules only it had.
    for pyc in root_path.glob("usr/lib/python3*/**/__pycache__/*.pyc"):
        if not (pyc.parent.parent / f"{pyc.name.split('.')[0]}.py").exists():
            pyc.unlink()
    wrong = [
        str(path.relative_to(root_path))
        for path in sorted(root_path.rglob("*"))
        if path.is_file() and not path.is_symlink()
        and elf_machine(path) not in (None, ELF_MACHINES[architecture])
    ]  # fmt: skip
    if wrong:
        raise ImageUnavailable(f"{native} ELF files left in the {architecture} root: {wrong[:10]}")


def tar_tree(root: Path, tarball: Path, source_date_epoch: int) -> None:
    """`root` as a tarball in a fixed order (numeric owners), as mmdebstrap writes its own."""
    partial = tarball.with_suffix(".partial.tar")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(root), "./", recursive=False)
        for directory, dirs, files in os.walk(root):
            dirs.sort()
            entries = [*(Path(directory) / d for d in dirs), *(Path(directory) / f for f in files)]
            for path in sorted(entries):
                info = tar.gettarinfo(str(path), "./" + str(path.relative_to(root)))
                info.mtime = min(int(info.mtime), source_date_epoch)
                info.uname = info.gname = ""
                if info.isreg():
                    with path.open("rb") as data:
                        tar.addfile(info, data)
                else:
                    tar.addfile(info)
    partial.rename(tarball)


def foreign_key(native: str, architecture: str) -> str:
    return digest([rootfs_key(native), architecture, Path(__file__).read_bytes()])


def ensure_foreign_rootfs(
    native_tarball: Path, native: str, architecture: str, source_date_epoch: int
) -> Path:
    """The cached root filesystem tarball of `architecture`, grafted from the native one."""
    tarball = (
        cache_root() / f"rootfs-{DEBIAN_SUITE}-{architecture}-from-{native}-"
        f"{foreign_key(native, architecture)}.tar"
    )
    if tarball.is_file():
        return tarball
    with tempfile.TemporaryDirectory(prefix="graft-", dir=cache_root()) as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with tarfile.open(native_tarball) as source:
            source.extractall(root, numeric_owner=True, filter="fully_trusted")
        debs = ensure_debs(root, rootfs_key(native), architecture)
        print(f"image: grafting Debian's {architecture} packages onto the {native} root...",
              file=sys.stderr)  # fmt: skip
        graft(root, debs, native, architecture)
        tar_tree(root, tarball, source_date_epoch)
    return tarball
