"""Owner references, read generically: an object's controller, and the pod -> ReplicaSet ->
Deployment chain as the Deployment and ReplicaSet controllers build it.

    controller_ref(pod)                  # the ownerReference with controller: true, or None
    controller_name(pod, "ReplicaSet")   # its name if it is a ReplicaSet, else None
    read_controller(reader, metadata)    # the same, typed, each malformed field recorded
    replicaset_from_pod_name("web-7c9f8b6d4-x2x7q")   # "web-7c9f8b6d4": generateName's base

This module is the one address of the rule: an object's owner is the first of its
ownerReferences whose `controller` is true (the API server lets an object have at most one:
apimachinery validation, "Only one reference can have Controller set to true"). The
detector reads it tolerantly (`controller_ref`, `controller_name`: a malformed reference is
no reference); the controller's slim views through a kube/rawjson.py FieldReader
(`read_controller`), which records what was malformed. A module that reads ownerReferences
otherwise (the controller's typed msgspec route for listed pods, decision/model.py, proven
equal to `read_controller` by its tests) imports this one (tests/unit/test_import_graph.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from graceful_drain.kube.rawjson import FieldReader, JsonObject, as_list, as_str, get_path

# A ReplicaSet's pods are named `<replicaset>-<5 characters>` (generateName;
# names.SimpleNameGenerator, whose alphabet is apimachinery's util/rand `alphanums`).
_GENERATED_SUFFIX = re.compile(r"^(?P<base>.+)-[bcdfghjklmnpqrstvwxz2456789]{5}$")


def controller_ref(obj: object) -> Mapping[str, object] | None:
    """The object's ownerReference with `controller: true`, or None."""
    for ref in as_list(get_path(obj, "metadata", "ownerReferences")):
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def controller_name(obj: object, kind: str) -> str | None:
    """The name of the object's controller if that controller is a `kind`, else None."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind:
        return None
    return as_str(ref.get("name"))


class ControllerRef(NamedTuple):
    """An object's controller reference, typed ("" where a field was absent or malformed)."""

    api_version: str
    kind: str
    name: str

    def is_a(self, api_version: str, kind: str) -> bool:
        """It names an object of this group/version and kind."""
        return self.api_version == api_version and self.kind == kind and self.name != ""


def read_controller(reader: FieldReader, metadata: JsonObject) -> ControllerRef | None:
    """The object's controller reference as `controller_ref` finds it, read through `reader`:
    a reference that is not an object, or a field of the wrong type up to the controller, is
    recorded in `reader.malformed` by its path."""
    for index, ref in enumerate(
        reader.sequence(metadata, "ownerReferences", "metadata.ownerReferences")
    ):
        path = f"metadata.ownerReferences[{index}]"
        if not isinstance(ref, Mapping):
            reader.malformed.append(path)
            continue
        if reader.boolean(ref, "controller", f"{path}.controller"):
            return ControllerRef(
                api_version=reader.string(ref, "apiVersion", f"{path}.apiVersion"),
                kind=reader.string(ref, "kind", f"{path}.kind"),
                name=reader.string(ref, "name", f"{path}.name"),
            )
    return None


def replicaset_from_pod_name(pod_name: str) -> str | None:
    """The ReplicaSet a pod's name was generated from, or None if it is not such a name.

    A ReplicaSet name longer than 58 characters was cut in its pods' names: what comes back
    is then not its name (a read of it finds nothing)."""
    match = _GENERATED_SUFFIX.match(pod_name)
    return match.group("base") if match else None
