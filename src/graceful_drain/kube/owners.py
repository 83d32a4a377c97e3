"""Owner references, read generically: an object's controller, and the pod -> ReplicaSet ->
Deployment chain as the Deployment and ReplicaSet controllers build it.

    controller_ref(pod)                  # the ownerReference with controller: true, or None
    controller_name(pod, "ReplicaSet")   # its name if it is a ReplicaSet, else None
    replicaset_from_pod_name("web-7c9f8b6d4-x2x7q")   # "web-7c9f8b6d4": generateName's base

Tolerant reads of raw JSON (kube/rawjson.py): a malformed reference is no reference. The
API server lets an object have at most one controller reference (apimachinery
validation: "Only one reference can have Controller set to true").
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from graceful_drain.kube.rawjson import as_list, as_str, get_path

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


def replicaset_from_pod_name(pod_name: str) -> str | None:
    """The ReplicaSet a pod's name was generated from, or None if it is not such a name.

    A ReplicaSet name longer than 58 characters was cut in its pods' names: what comes back
    is then not its name (a read of it finds nothing)."""
    match = _GENERATED_SUFFIX.match(pod_name)
    return match.group("base") if match else None
