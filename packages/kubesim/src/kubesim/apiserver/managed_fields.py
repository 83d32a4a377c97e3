"""Field ownership (`metadata.managedFields`) and server-side apply, after
k8s.io/apiserver's fieldmanager on structured-merge-diff, for the shapes the project's kinds
have.

A field is a path of steps: `("f", name)` a map field, `("k", '{"name":"app"}')` the item of
an associative list with that key. Leaves are scalars, atomic lists and empty maps; an
associative list's item is itself a field (fieldsV1's `"."`). Which lists are associative,
and by which key, is the `LIST_KEYS` table (upstream reads it from the OpenAPI schema).

Every write records its manager: an apply replaces the applier's set (operation Apply); any
other write gives its manager (operation Update) the fields it changed and takes them from
the others. An apply that changes a field another manager owns is a conflict (409) unless
forced, which moves the field to the applier. Fields the applier owned and no longer
applies are removed unless another manager owns them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.identity_cache import IdentityCache
from kubesim.types import Obj

from .errors import ApiError

Step = tuple[str, str]
Path = tuple[Step, ...]
ITEM = object()  # the value of an associative list's item as a field of its own

# field name of a list -> the keys of its items (the first set all items carry)
LIST_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "containers": (("name",),), "initContainers": (("name",),),
    "ephemeralContainers": (("name",),), "env": (("name",),), "volumes": (("name",),),
    "volumeMounts": (("mountPath",),), "imagePullSecrets": (("name",),),
    "webhooks": (("name",),), "matchConditions": (("name",),),
    "ports": (("containerPort", "protocol"), ("port", "protocol")),
    "ownerReferences": (("uid",),), "conditions": (("type",),),
}  # fmt: skip
# key fields an applied configuration may leave out, with the default the server gives them
KEY_DEFAULTS = {"protocol": "TCP"}
# metadata fields a manager may own; the rest is the server's
OWNED_METADATA = ("labels", "annotations", "ownerReferences", "finalizers")


def _list_key(field_name: str, items: list[Any]) -> tuple[str, ...] | None:
    for keys in LIST_KEYS.get(field_name, ()):
        if items and all(isinstance(i, dict) and keys[0] in i for i in items):
            return keys
    return None


def _item_step(keys: tuple[str, ...], item: Obj) -> Step:
    key = {k: item.get(k, KEY_DEFAULTS.get(k)) for k in keys}
    return ("k", json.dumps(key, separators=(",", ":"), sort_keys=True))


# Maps owned whole: metav1.LabelSelector is `+structType=atomic`, a Service's selector
# `+mapType=atomic`.
ATOMIC_MAPS = frozenset({"selector", "namespaceSelector", "objectSelector", "labelSelector",
                         "podSelector"})  # fmt: skip


def _atomic_map(field_name: str) -> bool:
    return field_name in ATOMIC_MAPS


def _leaves(value: Any, path: Path, field_name: str) -> Iterator[tuple[Path, Any]]:
    if isinstance(value, dict) and value and not _atomic_map(field_name):
        for name, child in value.items():
            yield from _leaves(child, (*path, ("f", name)), name)
        return
    key = _list_key(field_name, value) if isinstance(value, list) else None
    if key is None:
        yield path, value
        return
    for item in value:
        item_path = (*path, _item_step(key, item))
        yield item_path, ITEM
        for name, child in item.items():
            yield from _leaves(child, (*item_path, ("f", name)), name)


def fields(obj: Obj, subresource: str = "") -> dict[Path, Any]:
    """Every field a manager can own in `obj`, with its value: the status for the status
    subresource; otherwise the rest, with only the owned metadata."""
    if subresource == "status":
        return dict(_leaves(obj.get("status") or {}, (("f", "status"),), "status"))
    out: dict[Path, Any] = {}
    meta = obj.get("metadata") or {}
    for name in OWNED_METADATA:
        if name in meta:
            out.update(_leaves(meta[name], (("f", "metadata"), ("f", name)), name))
    for name, value in obj.items():
        if name not in ("apiVersion", "kind", "metadata", "status"):
            out.update(_leaves(value, (("f", name),), name))
    return out


# --- managedFields entries ----------------------------------------------------------------


@dataclass(frozen=True)
class Manager:
    name: str
    operation: str  # Apply or Update
    api_version: str
    subresource: str = ""


def encode(paths: set[Path]) -> Obj:
    """A set of fields as fieldsV1, as fieldpath.Set serializes it: a field of the set that
    also holds fields of the set (a keyed item and its fields; a field a manager owned as a
    leaf and now owns fields under) carries `"."`, itself, so that `decode` gives the set
    back whole."""
    root: Obj = {}
    members = []
    for path in sorted(paths):
        node = root
        for kind, name in path:
            node = node.setdefault(f"{kind}:{name}", {})
        members.append(node)
    for node in members:
        if node:
            node["."] = {}
    return root


def decode(fields_v1: Obj, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, child in fields_v1.items():
        if key == ".":
            out.add(prefix)
            continue
        kind, _, name = key.partition(":")
        path = (*prefix, (kind, name))
        if child:
            out |= decode(child, path)
        else:
            out.add(path)
    return out


Owners = dict[Manager, set[Path]]
Encoded = dict[Manager, tuple[set[Path], Obj]]  # a manager's fields and their fieldsV1


def owners(obj: Obj | None) -> Owners:
    out: Owners = {}
    for entry in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
        if isinstance(entry, dict) and entry.get("fieldsType") == "FieldsV1":
            manager = Manager(str(entry.get("manager", "")), str(entry.get("operation", "")),
                              str(entry.get("apiVersion", "")),
                              str(entry.get("subresource") or ""))  # fmt: skip
            out[manager] = decode(entry.get("fieldsV1") or {})
    return out


def entries(
    owned: Owners, times: Mapping[Manager, str],
    encoded: Mapping[Manager, tuple[set[Path], Obj]] | None = None,
) -> list[Obj]:  # fmt: skip
    """managedFields, sorted as upstream sorts them (operation, time, manager, ...).

    `encoded` holds fieldsV1 already encoded for some managers' sets of fields (reused, not
    copied, where the set is still the same)."""
    out = []
    for manager, paths in owned.items():
        if not paths:
            continue
        known = encoded.get(manager) if encoded else None
        same = known is not None and (known[0] is paths or known[0] == paths)
        fields_v1 = known[1] if known is not None and same else encode(paths)
        entry: Obj = {"manager": manager.name, "operation": manager.operation,
                      "apiVersion": manager.api_version, "time": times[manager],
                      "fieldsType": "FieldsV1", "fieldsV1": fields_v1}  # fmt: skip
        if manager.subresource:
            entry["subresource"] = manager.subresource
        out.append(entry)
    return sorted(out, key=lambda e: (e["operation"], e["time"], e["manager"], e["apiVersion"],
                                      e.get("subresource", "")))  # fmt: skip


def _times(obj: Obj | None) -> dict[Manager, str]:
    out = {}
    for entry in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
        if isinstance(entry, dict):
            manager = Manager(str(entry.get("manager", "")), str(entry.get("operation", "")),
                              str(entry.get("apiVersion", "")),
                              str(entry.get("subresource") or ""))  # fmt: skip
            out[manager] = str(entry.get("time", ""))
    return out


def _leaf_set(value: Any, path: Path, field_name: str) -> dict[Path, Any]:
    return dict(_leaves(value, path, field_name))


def _diff(before: Any, after: Any, path: Path, field_name: str, changed: set[Path],
          removed: set[Path]) -> None:  # fmt: skip
    """What `fields` of the two values would differ in, without flattening what is equal:
    `changed` gets the paths of `after`'s leaves that `before` lacks or holds another value
    at, `removed` the paths only `before` has. Equal values (==) have the same leaves."""
    if before == after:
        return
    if (isinstance(before, dict) and before and isinstance(after, dict) and after
            and not _atomic_map(field_name)):  # fmt: skip
        _diff_members(before, after, path, changed, removed)
        return
    if isinstance(before, list) and isinstance(after, list):
        old_items, new_items = _keyed_items(before, field_name), _keyed_items(after, field_name)
        if old_items is not None and new_items is not None:
            for step, item in new_items.items():
                item_path = (*path, step)
                if step in old_items:  # the item's own field (ITEM) is the same on both sides
                    _diff_members(old_items[step], item, item_path, changed, removed)
                else:
                    changed.update(p for p, _ in _leaves([item], path, field_name))
            for step, item in old_items.items():
                if step not in new_items:
                    removed.update(p for p, _ in _leaves([item], path, field_name))
            return
    old = _leaf_set(before, path, field_name)
    new = _leaf_set(after, path, field_name)
    changed.update(p for p, v in new.items() if p not in old or old[p] != v)
    removed.update(set(old) - set(new))


def _diff_members(before: Obj, after: Obj, path: Path, changed: set[Path],
                  removed: set[Path]) -> None:  # fmt: skip
    """_diff of two maps whose members are fields of their own (a map, a keyed item)."""
    for name, child in after.items():
        child_path = (*path, ("f", name))
        if name in before:
            _diff(before[name], child, child_path, name, changed, removed)
        else:
            changed.update(p for p, _ in _leaves(child, child_path, name))
    for name, child in before.items():
        if name not in after:
            removed.update(p for p, _ in _leaves(child, (*path, ("f", name)), name))


def _keyed_items(items: list[Any], field_name: str) -> dict[Step, Obj] | None:
    """An associative list's items by their step, by the key both sides' lists must share
    (the first key set of LIST_KEYS every item carries); None for any other list, or one
    whose items repeat a key (those are flattened whole)."""
    keys = _list_key(field_name, items)
    if keys is None or keys != LIST_KEYS[field_name][0]:
        return None
    out = {_item_step(keys, item): item for item in items}
    return out if len(out) == len(items) else None


def _changes(current: Obj | None, new: Obj, subresource: str) -> tuple[set[Path], set[Path]]:
    """(changed, removed): `fields(new)` against `fields(current)` as track_update compares
    them, walking only where the two objects differ."""
    changed: set[Path] = set()
    removed: set[Path] = set()
    if current is None:
        changed.update(fields(new, subresource))
        return changed, removed
    if subresource == "status":
        _diff(current.get("status") or {}, new.get("status") or {}, (("f", "status"),),
              "status", changed, removed)  # fmt: skip
        return changed, removed
    old_meta, new_meta = current.get("metadata") or {}, new.get("metadata") or {}
    for name in OWNED_METADATA:
        path: Path = (("f", "metadata"), ("f", name))
        if name in old_meta and name in new_meta:
            _diff(old_meta[name], new_meta[name], path, name, changed, removed)
        elif name in new_meta:
            changed.update(p for p, _ in _leaves(new_meta[name], path, name))
        elif name in old_meta:
            removed.update(p for p, _ in _leaves(old_meta[name], path, name))
    skip = ("apiVersion", "kind", "metadata", "status")
    for name, value in new.items():
        if name in skip:
            continue
        if name in current:
            _diff(current[name], value, (("f", name),), name, changed, removed)
        else:
            changed.update(p for p, _ in _leaves(value, (("f", name),), name))
    for name, value in current.items():
        if name not in skip and name not in new:
            removed.update(p for p, _ in _leaves(value, (("f", name),), name))
    return changed, removed


# The managedFields lists track_update wrote, with what they encode (owners, times, each
# manager's fieldsV1): the next update of the object finds them decoded, and a manager whose
# fields did not change keeps its fieldsV1 instead of encoding it again. The list an update
# finds on the stored object is the one written for it (stored objects are never mutated).
# That update takes the entry out: the object it was written for is then superseded, and
# keeping it would keep its managedFields alive for every full garbage collection to walk.
_WRITTEN: IdentityCache[tuple[Owners, dict[Manager, str], Encoded]] = IdentityCache(8192)


def _remember(listed: list[Obj], owned: Owners, times: dict[Manager, str]) -> None:
    """`listed` is entries(owned, times); `owned` is not changed afterwards."""
    encoded: Encoded = {}
    for entry in listed:
        manager = Manager(entry["manager"], entry["operation"], entry["apiVersion"],
                          entry.get("subresource", ""))  # fmt: skip
        encoded[manager] = (owned[manager], entry["fieldsV1"])
    _WRITTEN.put(listed, (owned, times, encoded))


def _decoded(obj: Obj | None) -> tuple[Owners, dict[Manager, str], Encoded]:
    """owners(obj) and _times(obj), as dicts fresh to change (their sets of paths are shared:
    replace a set, never change one), and the fieldsV1 known to encode each manager's set."""
    listed = ((obj or {}).get("metadata") or {}).get("managedFields")
    written = _WRITTEN.take(listed) if listed else None
    if written is None:
        return owners(obj), _times(obj), {}
    owned, times, encoded = written
    return dict(owned), dict(times), encoded


def track_update(current: Obj | None, new: Obj, manager: Manager, now: str) -> None:
    """Set `new`'s managedFields after a write that is not an apply."""
    owned, times, encoded = _decoded(current)
    changed, removed = _changes(current, new, manager.subresource)
    taken = changed | removed
    for other, paths in owned.items():
        if not paths.isdisjoint(taken):
            owned[other] = paths - taken
    if changed:
        owned[manager] = owned.get(manager, set()) | changed
        times[manager] = now
    listed = new["metadata"]["managedFields"] = entries(owned, times, encoded)
    _remember(listed, owned, times)


# --- apply --------------------------------------------------------------------------------


def _path_string(path: Path) -> str:
    """fieldpath.Path.String(): `.spec.replicas`, `.spec.containers[name="app"].image`."""
    out = ""
    for kind, name in path:
        if kind == "f":
            out += f".{name}"
        else:
            key = json.loads(name)
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in key.items()) + "]"
    return out


def _manager_text(manager: Manager) -> str:
    """printManager: the name quoted; an Update manager with its apiVersion and time."""
    text = json.dumps(manager.name)
    if manager.subresource:
        text += f" with subresource {json.dumps(manager.subresource)}"
    if manager.operation == "Update":  # the manager's identity carries no time
        return f"{text} using {manager.api_version}"
    return text


def conflict_error(conflicts: list[tuple[Manager, Path]]) -> ApiError:
    """NewConflictError: 409 Conflict, one cause per conflicting field."""
    shown = _manager_text

    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {shown(m)}",
               "field": _path_string(p)} for m, p in conflicts]  # fmt: skip
    if len(conflicts) == 1:
        manager, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {shown(manager)}: " + (
            _path_string(path)
        )
    else:
        by_manager: dict[Manager, list[Path]] = {}
        for manager, path in conflicts:
            by_manager.setdefault(manager, []).append(path)
        lines = []
        for manager in sorted(by_manager, key=lambda m: m.name):
            lines.append(f"conflicts with {shown(manager)}:")
            lines += [f"- {_path_string(p)}" for p in by_manager[manager]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, message, "Conflict", {"causes": causes})


def _find_item(items: list[Any], step: Step) -> Obj | None:
    key = json.loads(step[1])
    for item in items:
        if isinstance(item, dict) and all(
            item.get(k, KEY_DEFAULTS.get(k)) == v for k, v in key.items()
        ):
            return item
    return None


def _container(root: Obj, path: Path, create: bool) -> Any:
    """The dict or list holding the last step of `path` (None when missing)."""
    node: Any = root
    for index, step in enumerate(path[:-1]):
        following = path[index + 1]
        if step[0] == "f":
            if not isinstance(node, dict):
                return None
            if step[1] not in node or not isinstance(node[step[1]], dict | list):
                if not create:
                    return None
                node[step[1]] = [] if following[0] == "k" else {}
            node = node[step[1]]
        else:
            item = _find_item(node, step) if isinstance(node, list) else None
            if item is None:
                if not create or not isinstance(node, list):
                    return None
                item = dict(json.loads(step[1]))
                node.append(item)
            node = item
    return node


def _set(root: Obj, path: Path, value: Any) -> None:
    holder = _container(root, path, create=True)
    last = path[-1]
    if last[0] == "f" and isinstance(holder, dict):
        existing = holder.get(last[1])
        # An empty map or list merges into what is there (others' entries stay).
        if value in ({}, []) and isinstance(existing, type(value)):
            return
        holder[last[1]] = copy.deepcopy(value)
    elif last[0] == "k" and isinstance(holder, list) and _find_item(holder, last) is None:
        holder.append(dict(json.loads(last[1])))


def _remove(root: Obj, path: Path) -> None:
    holder = _container(root, path, create=False)
    last = path[-1]
    if last[0] == "f" and isinstance(holder, dict):
        holder.pop(last[1], None)
    elif last[0] == "k" and isinstance(holder, list):
        item = _find_item(holder, last)
        if item is not None:
            holder.remove(item)


@dataclass(frozen=True)
class Applied:
    obj: Obj
    owned: Owners
    times: dict[Manager, str]


def apply(current: Obj, applied: Obj, manager: Manager, force: bool, now: str) -> Applied:
    """Merge `applied` into `current` for `manager`; ApiError 409 on conflicts."""
    owned = owners(current)
    times = _times(current)
    have = fields(current)
    want = fields(applied)
    conflicts = [
        (other, path)
        for path, value in want.items()
        if path in have and have[path] != value
        for other, paths in owned.items()
        if other != manager and other.subresource == "" and path in paths
    ]
    if conflicts and not force:
        raise conflict_error(conflicts)
    for other, path in conflicts:
        owned[other].discard(path)
    merged = copy.deepcopy(current)
    for path, value in want.items():
        if value is not ITEM:
            _set(merged, path, value)
        else:
            _set(merged, path, None)
    others = set().union(*(p for m, p in owned.items() if m != manager and not m.subresource))
    kept = others | set(want)
    # A field still holding fields someone owns stays; removing an item removes its fields.
    holding = {path[:i] for path in kept for i in range(1, len(path))}
    dropped = owned.get(manager, set()) - kept - holding
    for path in sorted(dropped, key=len):
        _remove(merged, path)
    owned[manager] = set(want)
    times[manager] = now
    return Applied(merged, owned, times)
