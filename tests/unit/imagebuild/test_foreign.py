"""imagebuild/foreign.py: the foreign architecture's root filesystem grafted from the native
one. The pieces table-driven and as properties; the graft itself on a small merged-/usr root
with packages built by dpkg-deb (the release's own graft is read by tests/release/)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imagebuild.foreign import (
    ELF_MACHINES,
    Root,
    Stanza,
    _diverted,
    _filtered_out,
    elf_machine,
    graft,
    parse_control,
)


def elf(machine: int) -> bytes:
    """The first bytes of a little-endian 64-bit ELF executable for `machine`."""
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    return ident + (2).to_bytes(2, "little") + machine.to_bytes(2, "little") + bytes(44)


@pytest.mark.parametrize(
    ("path", "left_out"),
    [
        ("/usr/share/man/man1/bash.1.gz", True),
        ("/usr/share/info/coreutils.info.gz", True),
        ("/usr/share/locale/fr/LC_MESSAGES/tar.mo", True),
        ("/usr/share/doc/bash/README", True),
        ("/usr/share/doc/bash/copyright", False),  # re-included: the last match decides
        ("/usr/bin/bash", False),
        ("/usr/share/bash-completion/completions/x", False),
    ],
)
def test_dpkg_path_filters(path: str, left_out: bool) -> None:
    assert _filtered_out(path) is left_out


@pytest.mark.parametrize(
    ("header", "machine"),
    [
        (elf(ELF_MACHINES["amd64"]), 62),
        (elf(ELF_MACHINES["arm64"]), 183),
        (b"#!/bin/sh\n" + bytes(20), None),
        (b"\x7fELF", None),  # too short to hold e_machine
        (b"", None),
    ],
)
def test_elf_machine(tmp_path: Path, header: bytes, machine: int | None) -> None:
    (tmp_path / "file").write_bytes(header)
    assert elf_machine(tmp_path / "file") == machine


_FIELD_NAME = st.from_regex(r"[A-Z][a-z]{0,8}(-[A-Z][a-z]{0,8})?", fullmatch=True)
_VALUE = st.from_regex(r"[a-z0-9][a-z0-9.+~:-]{0,12}", fullmatch=True)
_MULTILINE = st.lists(_VALUE, min_size=1, max_size=3).map(
    lambda lines: "\n".join(f" {v}" for v in lines)
)


@given(
    st.lists(
        st.lists(
            st.tuples(_FIELD_NAME, st.one_of(_VALUE, _MULTILINE.map(lambda v: "\n" + v))),
            min_size=1, max_size=6, unique_by=lambda f: f[0],
        ),
        min_size=1, max_size=4,
    )
)  # fmt: skip
def test_control_paragraphs_render_and_parse_back(paragraphs: list[list[tuple[str, str]]]) -> None:
    text = "\n".join(Stanza(fields).render() for fields in paragraphs)
    assert [s.fields for s in parse_control(text)] == paragraphs


def test_control_fields_are_read_by_name_with_their_continuation_lines() -> None:
    [first, second] = parse_control(
        "Package: dash\nStatus: install ok installed\nDescription: POSIX shell\n two\n\n"
        "Package: tzdata\nArchitecture: all\n"
    )
    assert (first.get("package"), first.get("Description")) == ("dash", "POSIX shell\n two")
    assert (second.get("Architecture"), second.get("Version", "none")) == ("all", "none")


def test_diversions_apply_to_every_package_but_the_diverting_one() -> None:
    diversions = {"/bin/sh": ("/bin/sh.distrib", "dash")}
    assert _diverted("/bin/sh", "bash", diversions) == "/bin/sh.distrib"
    assert _diverted("/bin/sh", "dash", diversions) == "/bin/sh"
    assert _diverted("/bin/dash", "bash", diversions) == "/bin/dash"


@pytest.mark.parametrize(
    ("name", "resolved"),
    [
        ("/bin/bash", "usr/bin/bash"),  # merged /usr, relative symlink
        ("/bin", "bin"),  # the last component is not followed
        ("/etc/alt/x", "usr/share/x"),  # an absolute symlink stays inside the root
        ("/usr/lib/../bin/ls", "usr/bin/ls"),
        ("lib/x86_64-linux-gnu/libc.so.6", "usr/lib/x86_64-linux-gnu/libc.so.6"),
    ],
)
def test_paths_resolve_through_the_roots_own_symlinks(
    tmp_path: Path, name: str, resolved: str
) -> None:
    for directory in ("usr/bin", "usr/lib", "usr/share", "etc"):
        (tmp_path / directory).mkdir(parents=True, exist_ok=True)
    os.symlink("usr/bin", tmp_path / "bin")
    os.symlink("usr/lib", tmp_path / "lib")
    os.symlink("/usr/share", tmp_path / "etc" / "alt")
    assert Root(tmp_path).resolve(name) == tmp_path / resolved


def _deb(tmp: Path, package: str, arch: str, files: dict[str, bytes]) -> Path:
    tree = tmp / f"{package}-{arch}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: 1.0-1\nArchitecture: {arch}\nMaintainer: t <t@t>\n"
        f"Multi-Arch: same\nDescription: {package}\n long\n"
    )
    for name, data in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(data)
    (tree / "DEBIAN" / "md5sums").write_text(
        "".join(f"{hashlib.md5(data).hexdigest()}  {name}\n" for name, data in files.items())
    )
    deb = tmp / f"{package}_{arch}.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(tree), str(deb)],
        check=True, capture_output=True,
    )  # fmt: skip
    return deb


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is not installed")
def test_graft_swaps_the_architecture_specific_packages_and_keeps_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for directory in ("usr/bin", "usr/lib/x86_64-linux-gnu", "usr/share/doc/data",
                      "var/lib/dpkg/info", "etc"):  # fmt: skip
        (root / directory).mkdir(parents=True)
    os.symlink("usr/bin", root / "bin")
    os.symlink("usr/lib", root / "lib")
    (root / "usr/bin/tool").write_bytes(elf(62))
    (root / "usr/lib/x86_64-linux-gnu/libtool.so.1").write_bytes(elf(62))
    (root / "usr/share/doc/data/copyright").write_text("data\n")
    (root / "etc/ld.so.cache").write_bytes(b"native")
    (root / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n")  # a maintainer script's
    dpkg = root / "var/lib/dpkg"
    (dpkg / "status").write_text(
        "Package: tool\nStatus: install ok installed\nArchitecture: amd64\nMulti-Arch: same\n"
        "Version: 1.0-1\nDescription: tool\n\n"
        "Package: data\nStatus: install ok installed\nArchitecture: all\nVersion: 2\n"
        "Description: data\n"
    )
    (dpkg / "info/tool:amd64.list").write_text(
        "/.\n/bin\n/bin/tool\n/lib\n/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu/libtool.so.1\n"
    )
    (dpkg / "info/tool:amd64.md5sums").write_text("x  bin/tool\n")
    (dpkg / "info/data.list").write_text("/.\n/usr/share/doc/data/copyright\n")
    (dpkg / "arch").write_text("amd64\n")
    debs = tmp_path / "debs"
    debs.mkdir()
    _deb(debs, "tool", "arm64", {
        "bin/tool": elf(183),
        "lib/aarch64-linux-gnu/libtool.so.1": elf(183),
        "usr/share/man/man1/tool.1.gz": b"manual",  # left out by the path filters
    })  # fmt: skip

    graft(root, debs, "amd64", "arm64")

    assert (root / "bin").is_symlink() and os.readlink(root / "bin") == "usr/bin"
    assert elf_machine(root / "usr/bin/tool") == 183
    assert elf_machine(root / "usr/lib/aarch64-linux-gnu/libtool.so.1") == 183
    assert not (root / "usr/lib/x86_64-linux-gnu").exists()
    assert not (root / "usr/share/man/man1/tool.1.gz").exists()
    assert not (root / "etc/ld.so.cache").exists()
    assert (root / "etc/passwd").read_text().startswith("root:")
    assert (root / "usr/share/doc/data/copyright").read_text() == "data\n"
    assert (dpkg / "arch").read_text() == "arm64\n"
    status = {s.get("Package"): s for s in parse_control((dpkg / "status").read_text())}
    assert (status["tool"].get("Architecture"), status["tool"].get("Status")) == (
        "arm64", "install ok installed",
    )  # fmt: skip
    assert status["data"].get("Architecture") == "all"
    info = sorted(p.name for p in (dpkg / "info").iterdir())
    assert "tool:amd64.list" not in info and "tool:amd64.md5sums" not in info
    assert "tool:arm64.list" in info and "tool:arm64.md5sums" in info
    listed = (dpkg / "info/tool:arm64.list").read_text().splitlines()
    assert "/bin/tool" in listed and "/lib/aarch64-linux-gnu/libtool.so.1" in listed
