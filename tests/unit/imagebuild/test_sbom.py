"""imagebuild/sbom.py's pure parts: licenses from a wheel's METADATA and from a Debian
machine-readable copyright file, and the dependency graph (Requires-Dist with markers and
extras for the image's platform; Depends/Pre-Depends among the installed packages). The
whole SBOM, validated against CycloneDX 1.6, is tests/release/test_release_artifacts.py's."""

from __future__ import annotations

import email.parser
import io
import tarfile
from pathlib import Path

import pytest

from imagebuild.sbom import (
    copyright_licenses,
    debian_dependencies,
    python_dependencies,
    wheel_licenses,
)


def metadata(text: str) -> email.message.Message:
    return email.parser.Parser().parsestr(text)


@pytest.mark.parametrize(
    ("text", "licenses"),
    [
        ("License-Expression: MIT OR Apache-2.0\nLicense: ignored\n",
         [{"expression": "MIT OR Apache-2.0"}]),
        ("Classifier: License :: OSI Approved :: BSD License\n"
         "Classifier: Programming Language :: Python\n",
         [{"license": {"name": "BSD License"}}]),
        ("License: Apache 2.0\n", [{"license": {"name": "Apache 2.0"}}]),
        ("License: " + "x" * 81 + "\n", []),  # a whole license text is not a name
        ("Name: nothing\n", []),
    ],
)  # fmt: skip
def test_a_wheels_licenses(text: str, licenses: list[object]) -> None:
    assert wheel_licenses(metadata(text)) == licenses


def test_python_dependencies_follow_markers_and_extras_for_the_platform() -> None:
    requirements = {
        "app": ["lib", "winonly; sys_platform == 'win32'", "fast; platform_machine == 'aarch64'",
                "http[h2]", "old; python_version < '3.8'"],
        "lib": [], "winonly": [], "fast": [], "old": [],
        "http": ["core", "h2lib; extra == 'h2'", "socks; extra == 'socks'"],
        "core": ["http"],  # a cycle ends
        "h2lib": [], "socks": [],
    }  # fmt: skip
    amd64 = python_dependencies(requirements, ["app"], "amd64")
    assert amd64["app"] == {"lib", "http"}
    assert amd64["http"] == {"core", "h2lib"}
    assert amd64["core"] == {"http"}
    assert python_dependencies(requirements, ["app"], "arm64")["app"] == {"lib", "http", "fast"}


def test_debian_dependencies_keep_installed_alternatives_and_drop_constraints() -> None:
    packages = [
        {"name": "python3.11", "depends": "libc6 (>= 2.34), mime-support | media-types, tzdata"},
        {"name": "libc6", "depends": "libgcc-s1:amd64"},
        {"name": "libgcc-s1", "depends": ""},
        {"name": "media-types", "depends": ""},
    ]
    assert debian_dependencies(packages) == {
        "python3.11": {"libc6", "media-types"}, "libc6": {"libgcc-s1"},
        "libgcc-s1": set(), "media-types": set(),
    }  # fmt: skip


def _tar(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_debian_licenses_come_from_a_machine_readable_copyright_file_only(tmp_path: Path) -> None:
    dep5 = ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
            "Files: *\nLicense: GPL-2+\n\nFiles: lib/*\nLicense: LGPL-2.1+\n\n"
            "License: GPL-2+\n text\n")  # fmt: skip
    archive = _tar(tmp_path / "rootfs.tar", {
        "./usr/share/doc/dep5/copyright": dep5,
        "./usr/share/doc/prose/copyright": "This package is under the GPL.\n",
    })  # fmt: skip
    with tarfile.open(archive) as tar:
        assert copyright_licenses(tar, "dep5") == ["GPL-2+", "LGPL-2.1+"]
        assert copyright_licenses(tar, "prose") == []
        assert copyright_licenses(tar, "absent") == []
