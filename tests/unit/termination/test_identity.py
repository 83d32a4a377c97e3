"""Pod identity from the Downward API, with fallbacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from graceful_drain.termination.identity import (
    IdentityError,
    PodIdentity,
    read_text_or_none,
    resolve_identity,
)

FULL = {"POD_NAME": "web-1", "POD_NAMESPACE": "shop", "POD_UID": "u-1", "NODE_NAME": "node-a"}


@pytest.fixture
def namespace_file(tmp_path: Path) -> Path:
    path = tmp_path / "namespace"
    path.write_text("from-file\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (FULL, PodIdentity("web-1", "shop", "u-1", "node-a", "env:POD_NAME", "env:POD_NAMESPACE")),
        (
            {**FULL, "HOSTNAME": "ignored"},
            PodIdentity("web-1", "shop", "u-1", "node-a", "env:POD_NAME", "env:POD_NAMESPACE"),
        ),
        (
            {"HOSTNAME": "web-2", "POD_NAMESPACE": " shop "},
            PodIdentity("web-2", "shop", None, None, "env:HOSTNAME", "env:POD_NAMESPACE"),
        ),
        (
            {"POD_NAME": "  ", "HOSTNAME": "web-3", "POD_UID": "", "POD_NAMESPACE": "shop"},
            PodIdentity("web-3", "shop", None, None, "env:HOSTNAME", "env:POD_NAMESPACE"),
        ),
    ],
    ids=["downward api", "POD_NAME beats HOSTNAME", "HOSTNAME fallback", "blank is missing"],
)
def test_identity_from_env(env: dict[str, str], expected: PodIdentity, tmp_path: Path) -> None:
    assert resolve_identity(env, namespace_path=tmp_path / "absent") == expected


def test_namespace_falls_back_to_the_service_account_file(namespace_file: Path) -> None:
    identity = resolve_identity({"POD_NAME": "web-1"}, namespace_path=namespace_file)
    assert identity.namespace == "from-file"
    assert identity.namespace_source == f"file:{namespace_file}"


def test_env_namespace_wins_over_the_file(namespace_file: Path) -> None:
    identity = resolve_identity(FULL, namespace_path=namespace_file)
    assert identity.namespace == "shop"


def test_the_file_reader_is_injectable() -> None:
    read: list[Path] = []

    def reader(path: Path) -> str | None:
        read.append(path)
        return "injected"

    identity = resolve_identity(
        {"POD_NAME": "web-1"}, read_file=reader, namespace_path=Path("/x/namespace")
    )
    assert (identity.namespace, read) == ("injected", [Path("/x/namespace")])


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({}, ("name", "namespace")),
        ({"POD_NAMESPACE": "shop"}, ("name",)),
        ({"POD_NAME": "web-1"}, ("namespace",)),
    ],
)
def test_missing_identity_names_what_is_missing(
    env: dict[str, str], missing: tuple[str, ...], tmp_path: Path
) -> None:
    with pytest.raises(IdentityError) as raised:
        resolve_identity(env, namespace_path=tmp_path / "absent")
    assert raised.value.missing == missing


def test_blank_namespace_file_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "namespace"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(IdentityError):
        resolve_identity({"POD_NAME": "web-1"}, namespace_path=path)


def test_default_reader(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\xff\xfe")
    assert read_text_or_none(tmp_path / "absent") is None
    assert read_text_or_none(path) is None  # not UTF-8
    assert read_text_or_none(tmp_path) is None  # a directory
