"""The layers of docs/architecture.md, checked on the real import statements.

Every `import` and `from ... import` in a module counts, wherever it stands (a function body,
`if TYPE_CHECKING:`), relative imports resolved, so a rule cannot be dodged by a late import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
# Each distribution's source root, by top-level package (kubesim is packages/kubesim).
ROOTS = {"graceful_drain": SRC, "kubesim": REPO / "packages" / "kubesim" / "src"}


def root_of(package: str) -> Path:
    return ROOTS[package.split(".")[0]]


def module_name(path: Path, root: Path = SRC) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path = SRC) -> Iterator[str]:
    """Every module `path` imports (for `from a import b`, both `a` and `a.b`: b may be a
    module)."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def modules_under(package: str) -> list[Path]:
    paths = sorted((root_of(package) / package.replace(".", "/")).rglob("*.py"))
    assert paths, f"no module of {package} found: the walk would prove nothing"
    return paths


def violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    root = root_of(package)
    for path in modules_under(package):
        for imported in imported_modules(path, root):
            if any(imported == f or imported.startswith(f + ".") for f in forbidden):
                found.append(f"{module_name(path, root)} imports {imported}")
    return sorted(set(found))


def test_the_walk_sees_imports_in_function_bodies_and_relative_ones(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    module = package / "mod.py"
    module.write_text("from . import sibling\ndef f():\n    import late.module\n")
    assert set(imported_modules(module, tmp_path)) == {"pkg", "pkg.sibling", "late.module"}


def test_a_forbidden_import_is_reported() -> None:
    assert violations("graceful_drain.controller", ("graceful_drain.kube",)) != []


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        # The generic Kubernetes layer knows nothing of the domain built on it.
        (
            "graceful_drain.kube",
            (
                "graceful_drain.controller",
                "graceful_drain.termination",
                "graceful_drain.demo",
                "graceful_drain.inspection",
            ),
        ),
        # kubesim is an independent check on the product: it shares no code with it.
        ("kubesim", ("graceful_drain",)),
        # The command line builds the controller's plain values and hands them down.
        ("graceful_drain.controller", ("graceful_drain.config", "graceful_drain.cli")),
    ],
)
def test_a_layer_does_not_import_what_is_built_on_it(
    package: str, forbidden: tuple[str, ...]
) -> None:
    assert violations(package, forbidden) == []


def test_the_product_uses_kubesim_only_in_the_demo() -> None:
    found = violations("graceful_drain", ("kubesim",))
    assert found, "the demo runs on kubesim: the walk must see its imports"
    assert [f for f in found if not f.startswith("graceful_drain.demo")] == []
