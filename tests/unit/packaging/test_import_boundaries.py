"""kubesim and the product share no code: neither imports the other, but for the demo.

Read from the source (every import statement, wherever it stands, lazy ones included), so
a new import across the line fails here before it reaches a wheel.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PRODUCT = REPO / "src" / "graceful_drain"
KUBESIM = REPO / "packages" / "kubesim" / "src" / "kubesim"


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def importers_of(package: Path, top_level: str) -> list[str]:
    return sorted(
        str(path.relative_to(package.parent))
        for path in package.rglob("*.py")
        if any(m == top_level or m.startswith(top_level + ".") for m in imported_modules(path))
    )


def test_both_trees_are_where_this_test_looks() -> None:
    assert (PRODUCT / "cli.py").is_file()
    assert (KUBESIM / "apiserver" / "server.py").is_file()


def test_kubesim_imports_nothing_from_the_product() -> None:
    assert importers_of(KUBESIM, "graceful_drain") == []


def test_the_product_imports_kubesim_only_in_its_demo() -> None:
    importers = importers_of(PRODUCT, "kubesim")
    assert importers, "the demo runs on kubesim: this test must see its imports"
    assert [f for f in importers if not f.startswith("graceful_drain/demo/")] == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import kubesim", True),
        ("from kubesim.sim import KubeSim", True),
        ("def f():\n    from kubesim import cli\n", True),
        ("import kubesim_extra", False),
        ("from . import kubesim", False),
        ("x = 'kubesim'", False),
    ],
)
def test_what_counts_as_an_import(tmp_path: Path, source: str, found: bool) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text(source)
    assert importers_of(package, "kubesim") == (["pkg/mod.py"] if found else [])
