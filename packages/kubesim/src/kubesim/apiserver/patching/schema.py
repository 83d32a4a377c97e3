"""Strategic-merge metadata as a tree: what upstream reads from Go struct tags by reflection.

A :class:`PatchSchema` is one struct level; each known JSON field has the struct tag's
``patchStrategy`` (split on commas) and ``patchMergeKey``, and the schema of its value (of
each element, for a list). Fields the schema does not know merge like untyped JSON: objects
recursively, lists replaced.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeAlias

#: A Go struct tag's ``(patchStrategy, patchMergeKey)``, e.g. ``("merge,retainKeys", "name")``.
FieldTag: TypeAlias = tuple[str, str]

_STRATEGIES = frozenset({"merge", "replace", "retainKeys"})


@dataclass
class PatchSchema:
    """Patch metadata of one object level, keyed by JSON field name."""

    name: str = ""
    fields: Mapping[str, "SchemaField"] = field(default_factory=dict)

    def lookup(self, key: str) -> "SchemaField":
        return self.fields.get(key, _UNKNOWN_FIELD)


@dataclass(frozen=True)
class SchemaField:
    """One field's tag and the schema below it."""

    strategies: tuple[str, ...]
    merge_key: str
    schema: PatchSchema

    @property
    def strategy(self) -> str:
        """The strategy other than ``retainKeys`` (``""`` when none): what merging obeys."""
        others = [s for s in self.strategies if s != "retainKeys"]
        return others[0] if others else ""

    @property
    def retain_keys(self) -> bool:
        return "retainKeys" in self.strategies


EMPTY_SCHEMA = PatchSchema("", MappingProxyType({}))
_UNKNOWN_FIELD = SchemaField((), "", EMPTY_SCHEMA)


def parse_strategies(tag: str) -> tuple[str, ...]:
    """Split a ``patchStrategy`` tag; upstream accepts one strategy, or two with retainKeys."""
    strategies = tuple(s for s in tag.split(",") if s)
    unknown = set(strategies) - _STRATEGIES
    valid_pair = len(strategies) == 2 and "retainKeys" in strategies
    if unknown or len(strategies) > 2 or (len(strategies) == 2 and not valid_pair):
        raise ValueError(f"unexpected patch strategy: {tag!r}")
    return strategies


def schema_from_tags(name: str, tags: Mapping[str, FieldTag]) -> PatchSchema:
    """Build a schema from dotted field paths (list elements are transparent).

    ``{"spec.containers": ("merge", "name"), "spec.containers.env": ("merge", "name")}``
    describes ``spec.containers[*].env``. Intermediate fields without a tag get none.
    """
    root: dict[str, _Draft] = {}
    for path, (strategy, merge_key) in tags.items():
        level = root
        parts = path.split(".")
        for part in parts[:-1]:
            level = level.setdefault(part, _Draft()).children
        leaf = level.setdefault(parts[-1], _Draft())
        leaf.strategies = parse_strategies(strategy)
        leaf.merge_key = merge_key
    return _freeze(name, root)


@dataclass
class _Draft:
    strategies: tuple[str, ...] = ()
    merge_key: str = ""
    children: dict[str, "_Draft"] = field(default_factory=dict)


def _freeze(name: str, drafts: dict[str, _Draft]) -> PatchSchema:
    return PatchSchema(
        name,
        MappingProxyType(
            {
                key: SchemaField(
                    draft.strategies, draft.merge_key, _freeze(f"{name}.{key}", draft.children)
                )
                for key, draft in drafts.items()
            }
        ),
    )
