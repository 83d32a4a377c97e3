"""Two distributions: the graceful-drain wheel ships no simulator; kubesim only via `[demo]`.

Each wheel is built from exactly what its image or package build is given (for the product,
what deploy/Dockerfile copies: pyproject.toml, README.md and src/), with the `build` front
end and no network (setuptools comes from the dev dependencies).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[3]
KUBESIM = REPO / "packages" / "kubesim"


def _build_wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
         str(source)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (wheel,) = out.glob("*.whl")
    return wheel


def _copy(paths: list[Path], root: Path, dest: Path) -> None:
    for path in paths:
        target = dest / path.relative_to(root)
        if path.is_dir():
            shutil.copytree(
                path, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        else:
            shutil.copy2(path, target)


def _metadata(wheel: zipfile.ZipFile) -> Message:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return Parser().parsestr(wheel.read(name).decode())


@pytest.fixture(scope="module")
def product_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("graceful-drain-source")
    _copy([REPO / "pyproject.toml", REPO / "README.md", REPO / "src"], REPO, source)
    return zipfile.ZipFile(_build_wheel(source, tmp_path_factory.mktemp("dist")))


@pytest.fixture(scope="module")
def kubesim_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("kubesim-source")
    _copy([KUBESIM / "pyproject.toml", KUBESIM / "README.md", KUBESIM / "src"], KUBESIM, source)
    return zipfile.ZipFile(_build_wheel(source, tmp_path_factory.mktemp("dist")))


def test_the_product_wheel_holds_no_kubesim_file(product_wheel: zipfile.ZipFile) -> None:
    names = product_wheel.namelist()
    assert any(n.startswith("graceful_drain/controller/") for n in names)
    assert [n for n in names if "kubesim" in n.lower()] == []
    assert {n.split("/")[0] for n in names} == {"graceful_drain", "graceful_drain-0.1.0.dist-info"}


def test_the_product_requires_kubesim_only_for_its_demo(product_wheel: zipfile.ZipFile) -> None:
    metadata = _metadata(product_wheel)
    requirements = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    on_kubesim = [r for r in requirements if r.name == "kubesim"]
    assert on_kubesim, "the demo extra must pull the kubesim distribution"
    for requirement in on_kubesim:
        assert requirement.marker is not None, requirement
        assert requirement.marker.evaluate({"extra": "demo"}), requirement
        assert not requirement.marker.evaluate({"extra": ""}), requirement
        assert not requirement.marker.evaluate({"extra": "dev"}), requirement
    assert "demo" in (metadata.get_all("Provides-Extra") or [])


def test_the_product_installs_no_kubesim_command(product_wheel: zipfile.ZipFile) -> None:
    (name,) = [n for n in product_wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    entry_points = product_wheel.read(name).decode()
    assert "graceful-drain = graceful_drain.cli:main" in entry_points
    assert "kubesim" not in entry_points


def test_the_kubesim_wheel_is_the_simulator_alone(kubesim_wheel: zipfile.ZipFile) -> None:
    names = kubesim_wheel.namelist()
    assert {n.split("/")[0] for n in names} == {"kubesim", "kubesim-0.1.0.dist-info"}
    assert "kubesim/apiserver/server.py" in names
    requirements = [Requirement(r) for r in _metadata(kubesim_wheel).get_all("Requires-Dist") or []]
    assert "graceful-drain" not in {r.name for r in requirements}
