"""What two API servers may legitimately answer differently, taken out of an answer so that
what is left can be compared: identities, clocks and revisions.

Pure: `normalise(body)` returns a new JSON value; `compare(a, b)` lists the differences as
readable paths.
"""

from __future__ import annotations

import re
from typing import Any

Json = Any

UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
REVISION_IN_TEXT = re.compile(r"(?i)(resourceversion[^0-9]{0,40})(\d+)")
# Metadata only the server that wrote the object can know.
DROPPED_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink")
DROPPED_LIST_METADATA = ("resourceVersion", "selfLink")
GENERATED_SUFFIX = "<generated>"


def _text(value: str) -> str:
    if TIME.match(value):
        return "<time>"
    value = UID.sub("<uid>", value)
    return REVISION_IN_TEXT.sub(r"\1<rv>", value)


def _metadata(meta: dict[str, Json], *, is_list: bool) -> dict[str, Json]:
    dropped = DROPPED_LIST_METADATA if is_list else DROPPED_METADATA
    out = {k: normalise(v) for k, v in meta.items() if k not in dropped}
    if "continue" in out:
        out["continue"] = "<continue>"
    generate = meta.get("generateName")
    name = meta.get("name")
    if isinstance(generate, str) and isinstance(name, str) and name.startswith(generate):
        out["name"] = generate + GENERATED_SUFFIX
    return out


def normalise(value: Json) -> Json:
    if isinstance(value, dict):
        is_list = isinstance(value.get("items"), list)
        out: dict[str, Json] = {}
        for key, item in value.items():
            if key == "metadata" and isinstance(item, dict):
                out[key] = _metadata(item, is_list=is_list)
            elif key == "resourceVersion" and isinstance(item, str):
                out[key] = "<rv>"
            else:
                out[key] = normalise(item)
        return out
    if isinstance(value, list):
        return [normalise(item) for item in value]
    if isinstance(value, str):
        return _text(value)
    return value


def compare(left: Json, right: Json, path: str = "") -> list[str]:
    """Every place where `left` and `right` differ: "path: left != right"."""
    if isinstance(left, dict) and isinstance(right, dict):
        found = []
        for key in sorted(set(left) | set(right), key=str):
            where = f"{path}.{key}"
            if key not in left:
                found.append(f"{where}: missing != {_short(right[key])}")
            elif key not in right:
                found.append(f"{where}: {_short(left[key])} != missing")
            else:
                found += compare(left[key], right[key], where)
        return found
    if isinstance(left, list) and isinstance(right, list):
        if len(left) != len(right):
            return [f"{path}: {len(left)} items != {len(right)} items"]
        found = []
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            found += compare(a, b, f"{path}[{index}]")
        return found
    return [] if left == right else [f"{path}: {_short(left)} != {_short(right)}"]


def _short(value: Json, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
