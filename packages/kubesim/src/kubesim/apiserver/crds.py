"""CustomResourceDefinitions (apiextensions.k8s.io/v1): a CRD's served versions become
resource types kubesim serves (discovery, CRUD, list, watch, the status subresource if
declared), like any built-in one.

What kube-apiserver's apiextensions controllers do over seconds happens at once here: a new
CRD is written already Established, with its names accepted (`establish`, its defaulter),
and deleting it deletes its objects. Schemas are stored, not enforced: no validation, no
pruning, no defaults from them (docs/kubesim-fidelity.md).
"""

from __future__ import annotations

from collections.abc import Callable

from kubesim import jsoncodec
from kubesim.types import Obj

from .resources import ResourceRegistry, ResourceType, Subresource
from .store import Change, ObjectStore, StorageKey

GROUP = "apiextensions.k8s.io"
CRD_KEY: StorageKey = (GROUP, "customresourcedefinitions")
# The verbs apiextensions-apiserver lists for a custom resource, in its order.
CUSTOM_RESOURCE_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update",
                         "watch")  # fmt: skip


def _names(spec: Obj) -> Obj:
    names = dict(spec.get("names") or {})
    kind = str(names.get("kind") or "")
    names.setdefault("singular", kind.lower())
    names.setdefault("listKind", f"{kind}List")
    return names


def default_crd(crd: Obj) -> None:
    """SetDefaults_CustomResourceDefinition(Spec), then what the naming and establishing
    controllers write once the names are free: NamesAccepted and Established."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return
    spec["names"] = _names(spec)
    spec.setdefault("conversion", {"strategy": "None"})
    status = crd.setdefault("status", {})
    if not isinstance(status, dict) or status.get("conditions"):
        return
    now = crd["metadata"].get("creationTimestamp")
    status["acceptedNames"] = {k: v for k, v in spec["names"].items()}
    status["conditions"] = [
        {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
         "reason": "NoConflicts", "message": "no conflicts found"},
        {"type": "Established", "status": "True", "lastTransitionTime": now,
         "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
    ]  # fmt: skip
    status["storedVersions"] = [
        str(v.get("name")) for v in spec.get("versions") or [] if v.get("storage")
    ]


def crd_causes(crd: Obj) -> list[tuple[str, str]]:
    """The part of ValidateCustomResourceDefinition a hand-written CRD meets first: its name
    and names. Versions, schemas and conversion are not validated."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes: list[tuple[str, str]] = []
    name = crd["metadata"].get("name", "")
    if name != f"{names.get('plural', '')}.{spec.get('group', '')}":
        message = 'must be spec.names.plural+"."+spec.group'
        causes.append(("metadata.name", f'Invalid value: "{name}": {message}'))
    causes += [(f"spec.names.{key}", "Required value")
               for key in ("plural", "kind") if not names.get(key)]  # fmt: skip
    return causes


def resource_types(crd: Obj) -> list[ResourceType]:
    """One served resource type per served version of an established CRD."""
    spec = crd.get("spec") or {}
    names = _names(spec)
    group, plural, kind = str(spec.get("group", "")), str(names.get("plural", "")), names["kind"]
    out = []
    for version in spec.get("versions") or []:
        if not version.get("served"):
            continue
        declared = version.get("subresources") or {}
        subresources: tuple[Subresource, ...] = ()
        if "status" in declared:
            subresources = (Subresource("status", kind, ("get", "patch", "update")),)
        out.append(ResourceType(
            group, str(version.get("name")), kind, plural, spec.get("scope") == "Namespaced",
            tuple(names.get("shortNames") or ()), CUSTOM_RESOURCE_VERBS, subresources,
            tuple(names.get("categories") or ()), has_generation=True,
            printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
        ))  # fmt: skip
    return out


class CustomResources:
    """Keeps `resources` serving what the stored CRDs define; `changed` runs after each
    change (the OpenAPI documents are rebuilt from it)."""

    def __init__(self, store: ObjectStore, resources: ResourceRegistry,
                 changed: Callable[[], None] = lambda: None) -> None:  # fmt: skip
        self._store = store
        self._resources = resources
        self._changed = changed
        store.add_listener(self._on_change)

    def _on_change(self, key: StorageKey, change: Change) -> None:
        if key != CRD_KEY:
            return
        self._resources.set_custom(
            rt for crd in self._store.iter_all(CRD_KEY) for rt in resource_types(crd)
        )
        if change.type == "DELETED":
            self._delete_objects(change.object)
        self._changed()

    def _delete_objects(self, crd: Obj) -> None:
        """The customresourcecleanup finalizer's work, at once."""
        spec = crd.get("spec") or {}
        key = (str(spec.get("group", "")), str(_names(spec).get("plural", "")))
        for obj in self._store.iter_all(key):
            final = jsoncodec.copy(obj)
            final["metadata"]["resourceVersion"] = str(self._store.next_revision())
            self._store.remove(key, final)
