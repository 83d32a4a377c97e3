"""deploy/image/requirements.lock, which both image builds install from with
--require-hashes, against pyproject.toml's runtime dependencies. When this fails, run
./scripts/lock-image. (That the lock is complete, every dependency of every pin pinned too, is
proven by the install itself: pip refuses an unpinned dependency under --require-hashes, and
install-venv ends with `pip check`.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from imagebuild.spec import LOCK, REPO
from tests.unit.deploy.image_lock import read_lock

DIRECT = "graceful-drain (pyproject.toml)"


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def test_every_pin_is_exact_and_hashed() -> None:
    pins = read_lock(LOCK)
    assert len(pins) > len(runtime_requirements())
    for pin in pins:
        assert pin.hashes, f"{pin.name} has no --hash"
        assert len(set(pin.hashes)) == len(pin.hashes)
        assert pin.via, f"{pin.name}: pip-compile says what asked for each pin"


def test_the_direct_pins_are_pyprojects_dependencies() -> None:
    """A dependency added to or removed from pyproject.toml, or a specifier the pin no longer
    satisfies, fails here until the lock is regenerated."""
    pins = {pin.name: pin for pin in read_lock(LOCK)}
    requirements = {canonicalize_name(r.name): r for r in runtime_requirements()}
    direct = {name for name, pin in pins.items() if DIRECT in pin.via}
    assert direct == set(requirements)
    for name, requirement in requirements.items():
        pin = pins[name]
        assert requirement.specifier.contains(pin.version, prereleases=True), (name, pin.version)
        assert pin.marker == (None if requirement.marker is None else str(requirement.marker))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a==1 \\\n    --hash=sha256:" + "0" * 64 + "\n    # via graceful-drain (pyproject.toml)\n",
         [("a", "1", None, 1, [DIRECT])]),
        ('U_v==0.2 ; sys_platform != "win32" \\\n    --hash=sha256:' + "1" * 64 + " \\\n"
         "    --hash=sha256:" + "2" * 64 + "\n    # via\n    #   b\n    #   c\n",
         [("u-v", "0.2", 'sys_platform != "win32"', 2, ["b", "c"])]),
    ],
)  # fmt: skip
def test_read_lock(tmp_path: Path, text: str, expected: list[tuple[object, ...]]) -> None:
    path = tmp_path / "requirements.lock"
    path.write_text("#\n# header\n#\n" + text)
    pins = read_lock(path)
    assert [(p.name, p.version, p.marker, len(p.hashes), p.via) for p in pins] == expected
