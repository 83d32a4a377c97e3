"""The import rules of docs/architecture.md ("Import rules"), checked on the real import
statements of `graceful_drain`, `kubesim` and `realcluster`.

Every `import` and `from ... import` in a module counts, wherever it stands (a function body,
`if TYPE_CHECKING:`), relative imports resolved, so a rule cannot be dodged by a late import.
Each rule is data (`RULES`); each has a control: a throwaway tree of packages on disk that
breaks it, walked and checked by the same code, which must report it.

A rule that main breaks today because of work in flight elsewhere is still written here;
the breach it tolerates is listed in `KNOWN`, with who removes it. An entry that no longer
matches a real import fails the suite, so it is deleted the moment the fix lands.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
# Each top-level package's source root (kubesim is its own distribution in packages/kubesim).
ROOTS = {
    "graceful_drain": SRC,
    "kubesim": REPO / "packages" / "kubesim" / "src",
    "realcluster": REPO,
}

Graph = Mapping[str, frozenset[str]]  # module -> the modules (or module.name) it imports


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


def import_graph(roots: Mapping[str, Path]) -> dict[str, frozenset[str]]:
    """The imports of every module of each top-level package in `roots`."""
    graph: dict[str, frozenset[str]] = {}
    for package, root in roots.items():
        paths = sorted((root / package).rglob("*.py"))
        assert paths, f"no module of {package} under {root}: the walk would prove nothing"
        for path in paths:
            graph[module_name(path, root)] = frozenset(imported_modules(path, root))
    return graph


def within(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@dataclass(frozen=True)
class Facts:
    """What a module says besides its imports: the names it defines at its top level, and the
    strings it spells (docstrings left out: they may name a key to explain it)."""

    defines: frozenset[str]
    spells: frozenset[str]


def module_facts(path: Path) -> Facts:
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    defines: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defines.add(statement.name)
        elif isinstance(statement, ast.Assign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            defines.update(t.id for t in targets if isinstance(t, ast.Name))
    spells = {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings
    }  # fmt: skip
    return Facts(frozenset(defines), frozenset(spells))


def code_facts(roots: Mapping[str, Path]) -> dict[str, Facts]:
    return {
        module_name(path, root): module_facts(path)
        for package, root in roots.items()
        for path in sorted((root / package).rglob("*.py"))
    }


# --- the rules ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Forbidden:
    """No module of `importers` (minus `except_in`) imports anything of `forbidden`."""

    name: str
    importers: tuple[str, ...]
    forbidden: tuple[str, ...]
    except_in: tuple[str, ...] = ()

    def breaches(self, graph: Graph) -> list[str]:
        return sorted(
            f"{module} imports {imported}"
            for module, imports in graph.items()
            if within(module, self.importers) and not within(module, self.except_in)
            for imported in imports
            if within(imported, self.forbidden)
        )


@dataclass(frozen=True)
class Downward:
    """The rooms of `package` on floors, listed top first: a room imports only the rooms on
    the floors below its own (and itself), never one beside it; a room in `apart` imports no
    other room and is imported only by the top floor. `with_top`: modules beside the rooms
    that belong to the top floor's first room (its plain settings)."""

    name: str
    package: str
    floors: tuple[tuple[str, ...], ...]
    apart: tuple[str, ...]
    with_top: tuple[str, ...] = ()

    def room_of(self, module: str) -> str | None:
        if within(module, tuple(f"{self.package}.{m}" for m in self.with_top)):
            return self.floors[0][0]
        for room in (*(r for floor in self.floors for r in floor), *self.apart):
            if within(module, (f"{self.package}.{room}",)):
                return room
        return None

    def allowed(self, room: str) -> set[str]:
        if room in self.apart:
            return {room}
        level = next(i for i, floor in enumerate(self.floors) if room in floor)
        below = {room, *(r for floor in self.floors[level + 1 :] for r in floor)}
        return below | set(self.apart) if level == 0 else below

    def breaches(self, graph: Graph) -> list[str]:
        found = set()
        for module, imports in graph.items():
            room = self.room_of(module)
            if room is None:
                continue
            for imported in imports:
                target = self.room_of(imported)
                if target is not None and target not in self.allowed(room):
                    found.add(f"{module} ({room}) imports {imported} ({target})")
                elif (
                    target is None
                    and imported != self.package  # its own __init__, empty
                    and within(imported, (self.package,))
                ):  # a module beside the rooms
                    found.add(f"{module} ({room}) imports {imported} (outside the rooms)")
        return sorted(found)


@dataclass(frozen=True)
class NoReach:
    """No module of `importers` imports anything of `forbidden`, directly or through any
    module of ours it imports (a package's `__init__` counted with each of its modules)."""

    name: str
    importers: tuple[str, ...]
    forbidden: tuple[str, ...]

    def breaches(self, graph: Graph) -> list[str]:
        modules = frozenset(graph)
        found = set()
        for start in sorted(m for m in graph if within(m, self.importers)):
            via: dict[str, str] = {start: start}  # module reached -> the chain to it
            queue = [start]
            while queue:
                module = queue.pop(0)
                for imported in sorted(graph[module]):
                    if within(imported, self.forbidden):
                        found.add(f"{via[module]} imports {imported}")
                        continue
                    target = resolve(imported, modules)
                    parents = target.split(".") if target else []
                    for end in range(len(parents), 0, -1):
                        reached = ".".join(parents[:end])
                        if reached in graph and reached not in via:
                            via[reached] = f"{via[module]} -> {reached}"
                            queue.append(reached)
        return sorted(found)


@dataclass(frozen=True)
class OneAddress:
    """A contract at one address, `home`: its `names` are imported from `home` only (never
    re-exported by another module, nor defined again), and its `spellings` (a key's value, a
    field's name) appear in no string of another module of `covered` unless, with
    `spelled_by_importers`, that module imports from `home` (a typed reader of the same rule,
    documented there)."""

    name: str
    home: str
    names: tuple[str, ...]
    spellings: tuple[str, ...]
    covered: tuple[str, ...] = ("graceful_drain",)
    spelled_by_importers: bool = False

    def breaches(self, graph: Graph, facts: Mapping[str, Facts]) -> list[str]:
        found = set()
        for module, imports in graph.items():
            if module == self.home or not within(module, self.covered):
                continue
            for imported in imports:
                source, _, name = imported.rpartition(".")
                if name in self.names and source != self.home:
                    found.add(f"{module} imports {name} from {source}")
            known = facts.get(module, Facts(frozenset(), frozenset()))
            for name in sorted(known.defines & set(self.names)):
                found.add(f"{module} defines {name} again")
            if self.spelled_by_importers and self.home in imports:
                continue
            for text in known.spells:
                for spelling in self.spellings:
                    if spelling in text:
                        found.add(f"{module} spells {spelling!r}")
        return sorted(found)


def packages_in(modules: Iterable[str]) -> frozenset[str]:
    """The modules that are packages (something lives under them)."""
    return frozenset(
        ".".join(m.split(".")[:end]) for m in modules for end in range(1, m.count(".") + 1)
    )


def package_at(module: str, depth: int, packages: frozenset[str]) -> str:
    """What `module` counts in for cycles between packages `depth` names deep: its package
    of that depth, else the package it lives in; a top-level module of a distribution
    (`graceful_drain.config`) counts as a package of its own."""
    parts = module.split(".")
    cut = ".".join(parts[:depth])
    if cut in packages or len(parts) <= 2 or cut != module:
        return cut
    return ".".join(parts[:-1])


def resolve(imported: str, modules: frozenset[str]) -> str | None:
    """The module of ours an imported name lands in (its longest known prefix), if any."""
    parts = imported.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def nested(first: str, second: str) -> bool:
    """One package is the other or holds it (a package's own modules sit above and below
    its subpackages alike: `apiserver/server.py` serves `apiserver/openapi/`, which reads
    `apiserver/errors.py`; the controller's rooms have a stricter rule of their own)."""
    return within(first, (second,)) or within(second, (first,))


@dataclass(frozen=True)
class NoCycle:
    """No two packages, neither holding the other, import each other, directly or round a
    longer loop, at any depth: `graceful_drain.config` <-> `graceful_drain.controller` as
    much as two rooms of the controller or two subpackages of kubesim's apiserver."""

    name: str

    def breaches(self, graph: Graph) -> list[str]:
        modules = frozenset(graph)
        packages = packages_in(modules)
        found: set[str] = set()
        for depth in range(1, max(m.count(".") for m in modules) + 2):
            node = {m: package_at(m, depth, packages) for m in modules}
            edges: dict[str, dict[str, str]] = {}  # package -> imported one -> first witness
            for module, imports in sorted(graph.items()):
                for imported in sorted(imports):
                    target = resolve(imported, modules)
                    if target is None or nested(node[module], node[target]):
                        continue
                    edges.setdefault(node[module], {}).setdefault(
                        node[target], f"{module} imports {imported}"
                    )
            found.update(_cycles(edges))
        return sorted(found)


def _cycles(edges: Mapping[str, Mapping[str, str]]) -> Iterator[str]:
    """Each strongly connected set of two or more packages (Tarjan), with one witness per
    edge inside it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    for component in components:
        if len(component) > 1:
            members = set(component)
            witnesses = sorted(
                witness
                for source in component
                for target, witness in edges.get(source, {}).items()
                if target in members
            )
            yield f"cycle {' <-> '.join(sorted(component))}: {'; '.join(witnesses)}"


Rule = Forbidden | NoReach | Downward | OneAddress | NoCycle


def public_names(module: str) -> tuple[str, ...]:
    """The names a module of ours defines at its top level, without the private ones."""
    path = SRC / (module.replace(".", "/") + ".py")
    return tuple(sorted(n for n in module_facts(path).defines if not n.startswith("_")))


def key_values() -> tuple[str, ...]:
    """The annotation keys' values (PREFIX alone is no key: the Events' reporting controller
    and the webhook's name carry it too)."""
    keys = importlib.import_module("graceful_drain.annotations")
    return tuple(
        value
        for name in public_names(keys.__name__)
        if isinstance(value := getattr(keys, name), str) and value != keys.PREFIX
    )


DOMAIN = (
    "graceful_drain.controller",
    "graceful_drain.termination",
    "graceful_drain.inspection",
    "graceful_drain.demo",
)
# What does I/O: networking, an event loop, the clients and what runs on them, and logs.
IO = (
    "asyncio", "socket", "ssl", "selectors", "http", "urllib", "lightkube", "httpx", "httpx2",
    "aiohttp", "httptools", "graceful_drain.kube.client", "graceful_drain.kube.informer",
    "graceful_drain.kube.cache", "graceful_drain.kube.events", "graceful_drain.kube.lease",
    "graceful_drain.kube.rest",
    "graceful_drain.kube.loop", "graceful_drain.kube.workqueue", "graceful_drain.logs",
)  # fmt: skip
# The controller's HTTP client stack, and the kube/ modules that import it at the top.
LIGHTKUBE_STACK = (
    "lightkube",
    "httpx2",
    "httpcore2",
    "graceful_drain.kube.client",
    "graceful_drain.kube.events",
)
RULES: tuple[Rule, ...] = (
    # The generic Kubernetes layer knows nothing of the domain built on it, nor of the
    # process's configuration: config hands plain values down.
    Forbidden(
        "kube imports no domain and no config",
        ("graceful_drain.kube",),
        (*DOMAIN, "graceful_drain.config", "graceful_drain.cli"),
    ),
    # The detector runs in the workload's pod: it shares kube/ with the controller, not code.
    Forbidden(
        "termination imports nothing of the controller",
        ("graceful_drain.termination",),
        ("graceful_drain.controller",),
    ),
    # ... and it starts inside a pod's grace period: none of the operator's commands, their
    # HTTP client (aiohttp) or the process configuration, even lazily.
    Forbidden(
        "termination imports neither inspection, aiohttp, config nor the command line",
        ("graceful_drain.termination",),
        ("graceful_drain.inspection", "aiohttp", "graceful_drain.config", "graceful_drain.cli"),
        except_in=("graceful_drain.termination.cli",),
    ),
    # ... nor the controller's client stack (lightkube, httpx2 and the kube/ modules built on
    # them): it reads with kube/rest.py, whose imports are the standard library's.
    Forbidden(
        "termination imports neither lightkube nor httpx, even lazily",
        ("graceful_drain.termination",),
        LIGHTKUBE_STACK,
    ),
    Forbidden(
        "the lean client imports neither lightkube nor httpx",
        (
            "graceful_drain.kube.rest",
            "graceful_drain.kube.kubeconfig",
            "graceful_drain.kube.eventbody",
        ),
        LIGHTKUBE_STACK,
    ),
    # `plan`, `status` and the demo are built on the controller, never the other way round;
    # the command line builds the controller's plain values (controller/settings.py) and
    # hands them down.
    Forbidden(
        "controller imports neither config, inspection nor demo",
        ("graceful_drain.controller",),
        (
            "graceful_drain.config",
            "graceful_drain.cli",
            "graceful_drain.inspection",
            "graceful_drain.demo",
        ),
    ),
    # The real control plane is the reference kubesim and the product are measured against.
    Forbidden(
        "realcluster imports nothing of kubesim or the product",
        ("realcluster",),
        ("kubesim", "graceful_drain"),
    ),
    # The product's wheel carries no kubesim; only `graceful-drain demo` runs on it.
    Forbidden(
        "graceful_drain imports kubesim only in demo",
        ("graceful_drain",),
        ("kubesim",),
        except_in=("graceful_drain.demo",),
    ),
    # kubesim is an independent check on the product: it shares no code with it.
    Forbidden("kubesim imports nothing of graceful_drain", ("kubesim",), ("graceful_drain",)),
    # The controller's rooms on their floors: app; serving (the webhook) beside reconcile
    # (the reconciler); the cache (the reads) beside writes (the patch, the Events); the pure
    # decision; then kube. tls stands apart, wired by app.
    Downward(
        "controller rooms import only downward",
        "graceful_drain.controller",
        (("app",), ("serving", "reconcile"), ("cache", "writes"), ("decision",)),
        apart=("tls",),
        with_top=("settings",),
    ),
    # The decision table is pure: what it decides from is looked up by its callers (the
    # cache, `plan`), so it loads no client, no informer, no event loop, not even through a
    # module it imports.
    NoReach("decision imports no I/O", ("graceful_drain.controller.decision",), IO),
    # The keys the controller writes and the detector reads are defined in annotations.py,
    # and read from there by every module (no re-export, no second spelling).
    OneAddress(
        "annotation keys only from annotations.py",
        "graceful_drain.annotations",
        public_names("graceful_drain.annotations"),
        key_values(),
    ),
    # Who owns an object is kube/owners.py's rule; a module that reads ownerReferences
    # itself (a typed reader: decision/model.py's msgspec route, the detector's shape check)
    # takes the rule from there.
    OneAddress(
        "owners only from kube/owners.py",
        "graceful_drain.kube.owners",
        public_names("graceful_drain.kube.owners"),
        ("ownerReferences",),
        spelled_by_importers=True,
    ),
    NoCycle("no cycle between packages"),
)
RULE_NAMES = [rule.name for rule in RULES]

# Breaches main has today, each fixed by work in flight on another branch. The COORDINATOR
# deletes an entry once that work is merged (the suite fails while a stale entry stays).
KNOWN: dict[str, dict[str, str]] = {}


def known_cycle(breach: str, allowed: Mapping[str, str]) -> bool:
    return any(breach.startswith(entry) for entry in allowed)


KNOWN_CYCLES: dict[str, str] = {}


def unexpected(rule: Rule, graph: Graph, facts: Mapping[str, Facts]) -> tuple[list[str], list[str]]:
    """(breaches not listed as known, known entries that match no breach any more)."""
    found = rule.breaches(graph, facts) if isinstance(rule, OneAddress) else rule.breaches(graph)
    if isinstance(rule, NoCycle):
        return (
            [b for b in found if not known_cycle(b, KNOWN_CYCLES)],
            [k for k in KNOWN_CYCLES if not any(b.startswith(k) for b in found)],
        )
    known = KNOWN.get(rule.name, {})
    return [b for b in found if b not in known], [k for k in known if k not in found]


@pytest.fixture(scope="module")
def graph() -> dict[str, frozenset[str]]:
    return import_graph(ROOTS)


@pytest.fixture(scope="module")
def facts() -> dict[str, Facts]:
    return code_facts(ROOTS)


@pytest.mark.parametrize("rule", RULES, ids=RULE_NAMES)
def test_the_code_keeps_the_rule(rule: Rule, graph: Graph, facts: Mapping[str, Facts]) -> None:
    breaches, stale = unexpected(rule, graph, facts)
    assert breaches == [], f"{rule.name}: {breaches}"
    assert stale == [], f"{rule.name}: listed as known but no longer true, delete: {stale}"


# --- the controls: every rule can fail ---------------------------------------------------

# For each rule, a tree that breaks it: {file under the root: its source}.
CONTROLS: dict[str, dict[str, str]] = {
    "kube imports no domain and no config": {
        "graceful_drain/kube/cache.py": "def f():\n    from graceful_drain.config import X\n",
    },
    "termination imports neither inspection, aiohttp, config nor the command line": {
        "graceful_drain/termination/reader.py": "def f():\n    import aiohttp\n",
    },
    "termination imports neither lightkube nor httpx, even lazily": {
        "graceful_drain/termination/cli.py": "def f():\n    from lightkube import AsyncClient\n",
    },
    "the lean client imports neither lightkube nor httpx": {
        "graceful_drain/kube/rest.py": "import httpx2\n",
    },
    "termination imports nothing of the controller": {
        "graceful_drain/termination/evidence.py": (
            "from ..controller.decision.model import RESTARTED_AT\n"
        ),
    },
    "controller imports neither config, inspection nor demo": {
        "graceful_drain/controller/serving/webhook.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    import graceful_drain.inspection.plan\n"
        ),
    },
    "realcluster imports nothing of kubesim or the product": {
        "realcluster/cluster.py": "from kubesim.pki import CertificateAuthority\n",
    },
    "graceful_drain imports kubesim only in demo": {
        "graceful_drain/demo/run.py": "import kubesim.sim\n",  # allowed: not reported
        "graceful_drain/inspection/plan.py": "import kubesim.sim\n",
    },
    "kubesim imports nothing of graceful_drain": {
        "kubesim/sim.py": "from graceful_drain.kube import events\n",
    },
    "controller rooms import only downward": {
        "graceful_drain/controller/decision/table.py": (
            "from graceful_drain.controller.cache import cluster\n"
        ),
    },
    "no cycle between packages": {
        "graceful_drain/inspection/plan.py": "from graceful_drain.termination import classify\n",
        "graceful_drain/termination/classify.py": "def f():\n    from ..inspection import plan\n",
    },
    # Through a module of kube it imports, not directly.
    "decision imports no I/O": {
        "graceful_drain/controller/decision/table.py": "from graceful_drain.kube import timefmt\n",
        "graceful_drain/kube/timefmt.py": "from graceful_drain.kube.client import RawApi\n",
    },
    # A key re-exported by the decision model, as it was until 2026-12-07.
    "annotation keys only from annotations.py": {
        "graceful_drain/annotations.py": "RESTARTED_AT_ANNOTATION = 'x'\n",
        "graceful_drain/controller/decision/model.py": (
            "from graceful_drain.annotations import RESTARTED_AT_ANNOTATION as "
            "RESTARTED_AT_ANNOTATION\n"
        ),
        "graceful_drain/controller/decision/stamp.py": (
            "from .model import RESTARTED_AT_ANNOTATION\n"
        ),
    },
    # The detector's evidence choosing a pod's ReplicaSet by a rule of its own.
    "owners only from kube/owners.py": {
        "graceful_drain/termination/evidence.py": (
            "def owner(pod):\n    return pod['metadata']['ownerReferences'][0]['name']\n"
        ),
    },
}


def write_tree(root: Path, files: Mapping[str, str]) -> None:
    for relative, source in files.items():
        path = root / relative
        for folder in [path.parent, *path.parent.parents]:
            if folder == root:
                break
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "__init__.py").touch()
        path.write_text(source)


def tree_graph(root: Path, files: Mapping[str, str]) -> dict[str, frozenset[str]]:
    write_tree(root, files)
    tops = {relative.split("/")[0] for relative in files}
    return import_graph({top: root for top in tops})


def tree_breaches(rule: Rule, root: Path, files: Mapping[str, str]) -> list[str]:
    """`unexpected`'s breaches of `rule` in a throwaway tree of `files`."""
    graph = tree_graph(root, files)
    facts = code_facts({top: root for top in {relative.split("/")[0] for relative in files}})
    return unexpected(rule, graph, facts)[0]


def test_every_rule_has_a_control() -> None:
    assert sorted(CONTROLS) == sorted(RULE_NAMES)


@pytest.mark.parametrize("rule", RULES, ids=RULE_NAMES)
def test_a_tree_that_breaks_the_rule_is_reported(rule: Rule, tmp_path: Path) -> None:
    breaches = tree_breaches(rule, tmp_path, CONTROLS[rule.name])
    assert breaches, f"{rule.name}: its control was not reported"


KEY = "graceful-drain.stonal.com/restarted-at"


@pytest.mark.parametrize(
    ("rule_name", "files", "found"),
    [
        (
            "annotation keys only from annotations.py",
            {"graceful_drain/controller/writes/events.py": f"MESSAGE = '{KEY} is not a time'\n"},
            [f"graceful_drain.controller.writes.events spells {KEY!r}"],
        ),
        (
            "annotation keys only from annotations.py",
            {"graceful_drain/termination/signals.py": f"RESTARTED_AT_ANNOTATION = '{KEY}'\n"},
            [
                "graceful_drain.termination.signals defines RESTARTED_AT_ANNOTATION again",
                f"graceful_drain.termination.signals spells {KEY!r}",
            ],
        ),
        (  # a docstring may name the key it explains
            "annotation keys only from annotations.py",
            {"graceful_drain/termination/signals.py": f'"""Reads {KEY}."""\n'},
            [],
        ),
        (  # a typed reader that takes the rule from kube/owners.py
            "owners only from kube/owners.py",
            {
                "graceful_drain/controller/decision/model.py": (
                    "from graceful_drain.kube.owners import read_controller\n"
                    "FIELD = 'ownerReferences'\n"
                ),
            },
            [],
        ),
        (
            "owners only from kube/owners.py",
            {
                "graceful_drain/kube/owners.py": "def controller_ref(obj): ...\n",
                "graceful_drain/inspection/plan.py": (
                    "from graceful_drain.kube.owners import controller_ref\n"
                ),
                "graceful_drain/inspection/status.py": (
                    "from graceful_drain.inspection.plan import controller_ref\n"
                ),
            },
            [
                "graceful_drain.inspection.status imports controller_ref from "
                "graceful_drain.inspection.plan"
            ],
        ),
        (  # imported straight, with no module of ours between
            "decision imports no I/O",
            {"graceful_drain/controller/decision/model.py": "import lightkube\n"},
            ["graceful_drain.controller.decision.model imports lightkube"],
        ),
    ],
)
def test_a_contract_kept_at_one_address_and_one_broken(
    rule_name: str, files: dict[str, str], found: list[str], tmp_path: Path
) -> None:
    rule = next(r for r in RULES if r.name == rule_name)
    assert tree_breaches(rule, tmp_path, files) == found


def test_kubesim_in_the_demo_is_not_a_breach_and_elsewhere_is(tmp_path: Path) -> None:
    rule = next(r for r in RULES if r.name == "graceful_drain imports kubesim only in demo")
    found = tree_breaches(rule, tmp_path, CONTROLS[rule.name])
    assert found == ["graceful_drain.inspection.plan imports kubesim.sim"]


@pytest.mark.parametrize(
    ("importer", "imported", "allowed"),
    [
        ("app.py", "graceful_drain.controller.tls.context", True),
        ("app.py", "graceful_drain.controller.cache.cluster", True),
        ("serving/webhook.py", "graceful_drain.controller.writes.patcher", True),
        ("serving/webhook.py", "graceful_drain.controller.cache.cluster", True),
        ("serving/webhook.py", "graceful_drain.controller.decision.table", True),
        ("reconcile/reconciler.py", "graceful_drain.controller.writes.events", True),
        ("writes/patcher.py", "graceful_drain.controller.decision.model", True),
        ("cache/cluster.py", "graceful_drain.controller.decision.lookups", True),
        ("cache/cluster.py", "graceful_drain.kube.cache", True),
        ("decision/table.py", "graceful_drain.controller.decision.intstr", True),
        ("reconcile/rollout.py", "graceful_drain.controller.serving.webhook", False),
        ("serving/webhook.py", "graceful_drain.controller.reconcile.rollout", False),
        ("cache/cluster.py", "graceful_drain.controller.writes.events", False),
        ("writes/events.py", "graceful_drain.controller.cache.cluster", False),
        ("cache/cluster.py", "graceful_drain.controller.serving.webhook", False),
        ("decision/table.py", "graceful_drain.controller.cache.cluster", False),
        ("decision/table.py", "graceful_drain.controller.writes.events", False),
        ("serving/http.py", "graceful_drain.controller.app", False),
        ("serving/http.py", "graceful_drain.controller.tls.context", False),
        ("tls/certs.py", "graceful_drain.controller.decision.model", False),
        ("tls/certs.py", "graceful_drain.controller.tls.pki", True),
    ],
)
def test_the_rooms_rule_allows_downward_and_apart_only(
    importer: str, imported: str, allowed: bool, tmp_path: Path
) -> None:
    rule = next(r for r in RULES if isinstance(r, Downward))
    files = {f"graceful_drain/controller/{importer}": f"import {imported}\n"}
    assert (rule.breaches(tree_graph(tmp_path, files)) == []) == allowed


def test_a_longer_loop_is_a_cycle_and_a_chain_is_not(tmp_path: Path) -> None:
    rule = NoCycle("no cycle between packages")
    chain = {"pkg/a/m.py": "import pkg.b.m\n", "pkg/b/m.py": "import pkg.c.m\n",
             "pkg/c/m.py": "import os\n"}  # fmt: skip
    assert rule.breaches(tree_graph(tmp_path / "chain", chain)) == []
    loop = {**chain, "pkg/c/m.py": "from ..a import m\n"}
    assert rule.breaches(tree_graph(tmp_path / "loop", loop)) == [
        "cycle pkg.a <-> pkg.b <-> pkg.c: pkg.a.m imports pkg.b.m; "
        "pkg.b.m imports pkg.c.m; pkg.c.m imports pkg.a"
    ]


def test_a_known_breach_that_is_gone_is_reported_stale(tmp_path: Path) -> None:
    rule = next(r for r in RULES if r.name == "termination imports nothing of the controller")
    clean = tree_graph(tmp_path, {"graceful_drain/termination/evidence.py": "import os\n"})
    if KNOWN.get(rule.name):
        assert unexpected(rule, clean, {})[1] == list(KNOWN[rule.name])
    else:
        assert unexpected(rule, clean, {}) == ([], [])


def test_the_walk_sees_imports_in_function_bodies_and_relative_ones(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    module = package / "mod.py"
    module.write_text("from . import sibling\ndef f():\n    import late.module\n")
    assert set(imported_modules(module, tmp_path)) == {"pkg", "pkg.sibling", "late.module"}


def test_the_walk_reaches_every_package(graph: Graph) -> None:
    for package in ROOTS:
        assert any(within(m, (package,)) for m in graph), package
    assert "graceful_drain.controller.serving.webhook" in graph
    assert "realcluster.cluster" in graph


# --- start-up: what an entry point loads -------------------------------------------------
#
# The rules above see every import wherever it stands, so they cannot tell a lazy import
# from an eager one.  These run each light entry point in a fresh interpreter and list the
# modules it loaded: the detector starts inside a pod's grace period, and `--help` and
# `--version` answer at once.  Each has a control: the same program loading one forbidden
# module more, which must be reported.

HEAVY = (
    "graceful_drain.inspection",
    "graceful_drain.controller",
    "graceful_drain.config",
    "graceful_drain.demo",
    "aiohttp",
    "kubesim",
    "structlog",
)
# shutil: argparse's formatter would import it (and with it bz2 and lzma) to size itself.
LIGHT = (*HEAVY, "importlib.metadata", "lightkube", "httpx2", "asyncio", "yaml", "shutil")
# `graceful-drain --help`/`--version` and the command line's import: no subcommand's module
# either (the detector's loads when termination-cause is configured), nor importlib.util
# (only the demo looks kubesim up).
NO_SUBCOMMAND = (
    *LIGHT,
    "graceful_drain.termination.cli",
    "graceful_drain.termination.verdict",
    "graceful_drain.termination.evidence",
    "importlib.util",
)
# What a classification must not load either: the controller's client stack, and PyYAML
# (its import compiles regular expressions for tens of milliseconds): a pod's in-cluster
# account, like a kubeconfig written as JSON, needs no YAML parser.
DETECTOR_HEAVY = (*HEAVY, *LIGHTKUBE_STACK, "yaml")
REFUSED_KUBECONFIG = json.dumps(
    {
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
)
DUMP = "import json, sys\nprint(json.dumps(sorted(sys.modules)), flush=True)\n"


def cli_program(*argv: str) -> str:
    """`graceful-drain ARGV` in-process, then the loaded modules (an argparse exit too)."""
    return (
        "import sys\nfrom graceful_drain.cli import main\n"
        f"try:\n    main({list(argv)!r})\nexcept SystemExit:\n    pass\n" + DUMP
    )


# A real classification, recording its Event, against an API server that refuses the
# connection (a kubeconfig with a CA and a token, port 1): the detector's whole path, TLS
# context, reads and failures included; the modules are listed where the process would end
# (termination.cli.exit_now).
DETECTION = (
    "import os, sys\nimport graceful_drain.termination.cli as t\n"
    "kubeconfig = os.environ['KUBECONFIG'] = f'/tmp/import-graph-{os.getpid()}.kubeconfig'\n"
    "with open(kubeconfig, 'w') as f:\n"
    "    f.write(" + repr(REFUSED_KUBECONFIG) + ")\n"
    "def listed(code):\n"
    "    import json\n"
    "    os.unlink(kubeconfig)\n"
    "    print(json.dumps(sorted(sys.modules)), flush=True)\n"
    "    os._exit(0)\n"
    "t.exit_now = listed\n"
    "from graceful_drain.cli import main\n"
    "main(['termination-cause', '--grace-period', '2', '--record-event'])\n"
)


@dataclass(frozen=True)
class Loaded:
    """Running `program` in a fresh interpreter loads nothing of `forbidden`."""

    name: str
    program: str
    forbidden: tuple[str, ...]

    def breaches(self, loaded: Iterable[str]) -> list[str]:
        return sorted(f"loads {module}" for module in loaded if within(module, self.forbidden))


STARTUP_RULES = (
    Loaded("graceful-drain --help loads no subcommand", cli_program("--help"), NO_SUBCOMMAND),
    Loaded("graceful-drain --version loads no subcommand", cli_program("--version"), NO_SUBCOMMAND),
    Loaded(
        "termination-cause --help loads no client",
        cli_program("termination-cause", "--help"),
        LIGHT,
    ),
    Loaded(
        "importing the detector's command line is light",
        "import graceful_drain.cli\n" + DUMP,
        NO_SUBCOMMAND,
    ),
    Loaded("a classification loads only the detector", DETECTION, DETECTOR_HEAVY),
    Loaded(
        "the library's detect loads only the detector",
        "import graceful_drain.termination.detector, graceful_drain.termination.handler\n" + DUMP,
        DETECTOR_HEAVY,
    ),
)
STARTUP_NAMES = [rule.name for rule in STARTUP_RULES]


def loaded_by(program: str, env: Mapping[str, str] | None = None) -> list[str]:
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(SRC),
        "POD_NAME": "web-0",
        "POD_NAMESPACE": "shop",
        "POD_UID": "uid-1",
        "KUBECONFIG": "/nonexistent/kubeconfig",
        **(env or {}),
    }
    done = subprocess.run(
        [sys.executable, "-c", program], env=environment, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    loaded: list[str] = json.loads(lines[-1])
    assert "graceful_drain" in loaded, "the program loaded nothing of graceful_drain"
    return loaded


@pytest.mark.parametrize("rule", STARTUP_RULES, ids=STARTUP_NAMES)
def test_an_entry_point_loads_only_what_it_needs(rule: Loaded) -> None:
    assert rule.breaches(loaded_by(rule.program)) == [], rule.name


@pytest.mark.parametrize("rule", STARTUP_RULES, ids=STARTUP_NAMES)
def test_an_entry_point_that_loads_more_is_reported(rule: Loaded) -> None:
    """The control: the same program, with one forbidden module loaded first."""
    heavy = "import graceful_drain.inspection.commands\n"
    assert "loads graceful_drain.inspection.commands" in rule.breaches(
        loaded_by(heavy + rule.program)
    )


DETECTOR_RULES = [rule for rule in STARTUP_RULES if rule.forbidden == DETECTOR_HEAVY]


@pytest.mark.parametrize("module", ["lightkube", "httpx2", "graceful_drain.kube.events"])
@pytest.mark.parametrize("rule", DETECTOR_RULES, ids=[rule.name for rule in DETECTOR_RULES])
def test_a_detector_that_loads_the_client_stack_is_reported(rule: Loaded, module: str) -> None:
    """The control of the client stack: the detector's programs, with one module of it
    loaded first."""
    assert f"loads {module}" in rule.breaches(loaded_by(f"import {module}\n" + rule.program))


@pytest.mark.parametrize("rule", DETECTOR_RULES, ids=[rule.name for rule in DETECTOR_RULES])
def test_a_detector_that_loads_pyyaml_is_reported(rule: Loaded) -> None:
    """The control of the YAML rule: the detector's programs with PyYAML loaded first."""
    assert "loads yaml" in rule.breaches(loaded_by("import yaml\n" + rule.program))


def test_the_classification_reads_and_records() -> None:
    """The classification rule runs the whole path: the lean client, its TLS context and
    the Event's body are loaded, not only imported names."""
    loaded = loaded_by(DETECTION)
    assert {"graceful_drain.kube.rest", "ssl", "graceful_drain.termination.recording"} <= set(
        loaded
    )


NO_SUBCOMMAND_RULES = [rule for rule in STARTUP_RULES if rule.forbidden == NO_SUBCOMMAND]


@pytest.mark.parametrize(
    "rule", NO_SUBCOMMAND_RULES, ids=[rule.name for rule in NO_SUBCOMMAND_RULES]
)
def test_a_command_line_that_loads_the_detector_is_reported(rule: Loaded) -> None:
    """The control of the subcommands' lazy boundary: the same program, with the detector's
    command line loaded first."""
    program = "import graceful_drain.termination.cli\n" + rule.program
    assert "loads graceful_drain.termination.cli" in rule.breaches(loaded_by(program))
