"""The JSON schemas of `plan --json` and `status --json` as docs/cli.md documents them, and a
check of a document against them: every documented field present with a documented type,
no undocumented field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[3] / "docs" / "cli.md"
SUBSCHEMAS = ("decision", "webhook", "terminationDeadline")  # documented once, own table
_ROW = re.compile(r"^\| `(?P<path>[^`]+)` \| (?P<types>[a-z|\\]+) \|")
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),),
}  # fmt: skip


def documented(name: str) -> dict[str, list[str]]:
    """path -> type names, from the table after `<!-- schema: NAME -->`."""
    lines = DOC.read_text().splitlines()
    start = lines.index(f"<!-- schema: {name} -->")
    fields: dict[str, list[str]] = {}
    for line in lines[start + 3 :]:
        if not line.startswith("|"):
            break
        match = _ROW.match(line)
        assert match is not None, f"docs/cli.md: unreadable schema row {line!r}"
        fields[match["path"]] = match["types"].replace("\\", "").split("|")
    return fields


def _flatten(value: Any, prefix: str, out: dict[str, list[Any]]) -> None:
    if isinstance(value, dict) and not prefix.endswith(SUBSCHEMAS):
        for key, child in value.items():
            _flatten(child, f"{prefix}.{key}" if prefix else key, out)
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        out.setdefault(prefix, []).append(value)
        for item in value:
            for key, child in item.items():
                _flatten(child, f"{prefix}[].{key}", out)
    else:
        out.setdefault(prefix, []).append(value)


def _is(value: Any, types: list[str]) -> bool:
    if isinstance(value, bool) and "boolean" not in types:
        return False
    return any(isinstance(value, _TYPES[name]) for name in types)


def problems(document: dict[str, Any], name: str) -> list[str]:
    """What in `document` disagrees with the documented schema `name` (empty: none)."""
    schema = documented(name)
    found: dict[str, list[Any]] = {}
    _flatten(document, "", found)
    found = {path: values for path, values in found.items() if path}
    issues = []
    item_lists = {path.rsplit("[]", 1)[0] for path in schema if "[]" in path}
    for path, values in found.items():
        if path in item_lists:
            continue  # a list of objects: its items' fields are checked
        if path not in schema:
            issues.append(f"{path}: not documented")
            continue
        for value in values:
            if not _is(value, schema[path]):
                issues.append(f"{path}: {value!r} is not {'|'.join(schema[path])}")
            for sub in SUBSCHEMAS:
                if path.endswith(sub) and isinstance(value, dict):
                    issues.extend(f"{path}.{p}" for p in problems(value, sub))
    for path in schema:
        parent = path.rsplit("[]", 1)[0]
        empty = parent in item_lists and all(value == [] for value in found.get(parent, [[]]))
        if path not in found and not empty:
            issues.append(f"{path}: documented, missing")
    return issues
