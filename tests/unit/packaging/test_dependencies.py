"""The product declares what it imports, and imports what it declares: every runtime
dependency in pyproject.toml is imported somewhere under src/graceful_drain (the tests',
bench's and scripts' own needs live in the dev extra), and every third-party module the
product imports belongs to a declared dependency."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "src" / "graceful_drain"
OWN = {"graceful_drain", "kubesim"}  # kubesim: the demo extra's, imported lazily


def imported_top_level_modules(root: Path) -> set[str]:
    modules = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.partition(".")[0])
    return modules - set(sys.stdlib_module_names) - OWN - {"__future__"}


def distributions_of(modules: set[str]) -> dict[str, set[str]]:
    owners = packages_distributions()
    return {module: {canonicalize_name(d) for d in owners.get(module, [])} for module in modules}


def declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {canonicalize_name(Requirement(text).name) for text in project["dependencies"]}


def test_every_declared_dependency_is_imported_by_the_product() -> None:
    imported = set().union(*distributions_of(imported_top_level_modules(SOURCE)).values())
    assert declared() - imported == set()


def test_every_third_party_module_the_product_imports_is_declared() -> None:
    undeclared = {module: owners for module, owners in
                  distributions_of(imported_top_level_modules(SOURCE)).items()
                  if not owners & declared()}  # fmt: skip
    assert undeclared == {}


def test_the_scan_sees_a_module_that_is_imported(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import yaml\nfrom shtab import complete\nimport os\n")
    assert imported_top_level_modules(tmp_path) == {"yaml", "shtab"}
    assert distributions_of({"yaml"}) == {"yaml": {"pyyaml"}}
