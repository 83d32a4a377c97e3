"""Object lifecycle over the store, after k8s.io/apiserver/pkg/registry/generic/registry.

Create, update and delete are split into `prepare_*` (pure checks and
defaulting) and `commit_*` (the write), so the HTTP layer can run admission
webhooks in between and still detect a conflicting write that happened while
it waited.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections.abc import Callable
from typing import Any

from kubesim.types import Obj

from .. import jsoncodec
from . import defaults, validation
from .errors import (
    OBJECT_MODIFIED,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    invalid,
    not_found,
    success_status,
)
from .meta import generate_name, rfc3339
from .resources import ResourceRegistry, ResourceType
from .store import ObjectStore

Clock = Callable[[], dt.datetime]

TERMINAL_POD_PHASES = ("Succeeded", "Failed")
# NamespaceLifecycle's immortal namespaces (kube-apiserver's defaults): never deleted.
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


def _copy(obj: Obj) -> Obj:
    copied: Obj = jsoncodec.copy(obj)
    return copied


# Kinds whose registry sets ReturnDeletedObject (pkg/registry/*/storage/storage.go): a DELETE
# answers with the object instead of a Status.
RETURN_DELETED_OBJECT_KINDS = frozenset({
    "Pod", "ServiceAccount", "Namespace", "Service", "PersistentVolume", "PersistentVolumeClaim",
    "ResourceQuota", "PodTemplate", "StorageClass", "CSIDriver", "CSINode", "VolumeAttachment",
    # apiextensions' own Delete answers with the CRD it marked for deletion.
    "CustomResourceDefinition",
})  # fmt: skip


# Kinds whose strategy's AllowUnconditionalUpdate is false: an update must name the
# resourceVersion it replaces.
CONDITIONAL_UPDATE_ONLY_KINDS = frozenset({
    "Lease", "PodDisruptionBudget", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "RuntimeClass", "CSIDriver", "CSINode",
    "VolumeAttachment",
})  # fmt: skip


class Registry:
    def __init__(
        self,
        store: ObjectStore,
        resources: ResourceRegistry,
        clock: Clock | None = None,
        seed: int | None = None,
    ) -> None:
        self.store = store
        self.resources = resources
        self.clock: Clock = clock or (lambda: dt.datetime.now(dt.UTC))
        self._rng = random.Random(seed)
        self._uid_rng = random.Random(seed)

    def new_uid(self) -> str:
        return str(uuid.UUID(int=self._uid_rng.getrandbits(128), version=4))

    # reads

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.storage_key, namespace, name)
        if obj is None:
            raise not_found(rt.group, rt.plural, name)
        return obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return self.store.get(rt.storage_key, namespace, name)

    # create

    def prepare_create(
        self, rt: ResourceType, namespace: str, body: Any, *, handed_over: bool = False
    ) -> Obj:
        """`handed_over`: the body is the caller's to give away (a request's, just decoded),
        so it is changed in place rather than copied."""
        obj = self._checked_body(rt, body, handed_over)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            # NamespaceLifecycle, before the name is generated and the object validated (an
            # admission plugin, ahead of them and of the webhooks upstream)
            requested = meta.get("name") or meta.get("generateName") or "Unknown"
            self._check_namespace_open(rt, namespace, str(requested))
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = generate_name(str(meta["generateName"]), self._rng)
        for key in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        meta["uid"] = self.new_uid()
        meta["creationTimestamp"] = rfc3339(self.clock())
        if rt.has_generation:
            meta["generation"] = 1
        if rt.has_status_subresource and rt.kind not in ("Node", "Namespace", "Pod"):
            obj.pop("status", None)
        if rt.kind == "Pod":
            obj["status"] = {}
        defaults.apply_defaults(rt.group, rt.kind, obj)
        validation.validate(rt, obj)
        return obj

    def commit_create(self, rt: ResourceType, obj: Obj, dry_run: bool = False) -> Obj:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        if rt.namespaced:  # again: it may have begun terminating while the webhooks ran
            self._check_namespace_open(rt, namespace, meta["name"])
        if self.store.get(rt.storage_key, namespace, meta["name"]) is not None:
            raise already_exists(rt.group, rt.plural, meta["name"])
        if dry_run:
            return obj
        meta["resourceVersion"] = str(self.store.next_revision())
        self.store.put(rt.storage_key, obj)
        return obj

    def _check_namespace_open(self, rt: ResourceType, namespace: str, name: str) -> None:
        """NamespaceLifecycle on a create of `name` (its generateName when it has no name
        yet): the namespace must exist and not be terminating."""
        ns = self.store.get(("", "namespaces"), "", namespace)
        if ns is None:
            raise not_found("", "namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise forbidden(
                rt.group, rt.plural, name,
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated",
                [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                  "message": f"namespace {namespace} is being terminated"}],
            )  # fmt: skip

    # update

    def prepare_update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        subresource: str = "",
        *,
        handed_over: bool = False,
    ) -> tuple[Obj, Obj]:
        """(the stored object, the one to store); `handed_over` as for prepare_create."""
        current = self.get(rt, namespace, name)
        new = self._checked_body(rt, body, handed_over)
        meta = new.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        requested_rv = meta.get("resourceVersion")
        if not requested_rv and rt.kind in CONDITIONAL_UPDATE_ONLY_KINDS:
            # generic registry Store.Update: `qualifiedKind` is built from the resource.
            raise invalid(rt.group, rt.plural, name, [
                ("metadata.resourceVersion", "Invalid value: 0: must be specified for an update")
            ])  # fmt: skip
        if requested_rv and requested_rv != current["metadata"]["resourceVersion"]:
            raise conflict(rt.group, rt.plural, name, OBJECT_MODIFIED)
        old_meta = current["metadata"]
        if subresource == "status":
            # Status writes change only status (pods/status may also touch conditions-related
            # metadata upstream; we keep metadata as is). The rest is shared with the stored
            # object, which is never mutated; metadata is copied one level, as the write
            # replaces some of its fields.
            updated = {**current, "metadata": dict(old_meta), "status": new.get("status", {})}
            if rt.kind == "Deployment":
                # deploymentStatusStrategy resets only spec and labels: the controller sets
                # the revision annotation through UpdateStatus (pkg/registry/apps/deployment).
                annotations = meta.get("annotations")
                if annotations:
                    updated["metadata"]["annotations"] = annotations  # new is a copy
                else:
                    updated["metadata"].pop("annotations", None)
            return current, updated
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = namespace
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                    "generation"):  # fmt: skip
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if rt.has_status_subresource and "status" in current:
            new["status"] = _copy(current["status"])
        elif rt.has_status_subresource and rt.printer_columns is not None:
            new.pop("status", None)  # a custom resource's status is the subresource's alone
        defaults.apply_defaults(rt.group, rt.kind, new)
        validation.validate(rt, new)
        validation.check_immutable(rt, current, new)
        validation.check_finalizers_update(rt, current, new)
        if rt.has_generation and _spec_of(new) != _spec_of(current):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        return current, new

    def commit_update(self, rt: ResourceType, current: Obj, new: Obj, dry_run: bool = False) -> Obj:
        meta = new["metadata"]
        latest = self.store.get(rt.storage_key, meta.get("namespace", ""), meta["name"])
        if latest is None:
            raise not_found(rt.group, rt.plural, meta["name"])
        if latest["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise conflict(rt.group, rt.plural, meta["name"], OBJECT_MODIFIED)
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        if new == current:
            return current  # a no-op write does not bump the resourceVersion
        if dry_run:
            return new
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not (rt.kind == "Namespace" and (new.get("spec") or {}).get("finalizers"))
        ) and not _pod_still_terminating(rt, new):
            return self._remove(rt, new)
        meta["resourceVersion"] = str(self.store.next_revision())
        self.store.put(rt.storage_key, new)
        return new

    # delete

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        options: Obj | None = None,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """Delete per DeleteOptions. Returns (response body, deleted_now)."""
        self.check_deletable(rt, name)
        options = options or {}
        current = self.get(rt, namespace, name)
        self._check_preconditions(rt, current, options.get("preconditions") or {})
        meta = current["metadata"]
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is True:
            policy = "Orphan"
        grace = self._grace_period(rt, current, options)
        updated = _copy(current)
        umeta = updated["metadata"]
        finalizers = list(umeta.get("finalizers") or [])
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        elif policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        needs_wait = bool(finalizers) or grace > 0 or rt.kind == "Namespace"
        if not needs_wait:
            if dry_run:
                return self._delete_response(rt, current), True
            return self._delete_response(rt, self._remove(rt, current)), True
        now = self.clock()
        if meta.get("deletionTimestamp"):
            # Already terminating: a shorter grace period can only bring the deadline forward.
            old_grace = int(meta.get("deletionGracePeriodSeconds") or 0)
            if grace >= old_grace and finalizers == list(meta.get("finalizers") or []):
                return current, False
        umeta["deletionTimestamp"] = rfc3339(now + dt.timedelta(seconds=grace))
        umeta["deletionGracePeriodSeconds"] = grace
        if finalizers:
            umeta["finalizers"] = finalizers
        if rt.kind == "Namespace":
            updated.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return updated, False
        umeta["resourceVersion"] = str(self.store.next_revision())
        self.store.put(rt.storage_key, updated)
        return updated, False

    @staticmethod
    def check_deletable(rt: ResourceType, name: str) -> None:
        """NamespaceLifecycle on a delete: an immortal namespace is refused, dry run or not,
        before anything else is looked at (an admission plugin, ahead of the webhooks)."""
        if name in IMMORTAL_NAMESPACES and rt.kind == "Namespace" and not rt.group:
            raise forbidden("", "namespaces", name, "this namespace may not be deleted")

    def _grace_period(self, rt: ResourceType, obj: Obj, options: Obj) -> int:
        if rt.kind != "Pod":
            return 0
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        # pkg/registry/core/pod/strategy.go CheckGracefulDelete
        if not spec.get("nodeName") or status.get("phase") in TERMINAL_POD_PHASES:
            return 0
        requested = options.get("gracePeriodSeconds")
        if isinstance(requested, int) and not isinstance(requested, bool):
            return max(requested, 0) if requested > 0 else 0
        value = spec.get("terminationGracePeriodSeconds", 30)
        return int(value) if isinstance(value, int) else 30

    def _check_preconditions(self, rt: ResourceType, obj: Obj, pre: Obj) -> None:
        # The storage layer's check (apiserver/pkg/storage/interfaces.go Preconditions.Check):
        # its conflict names the Kind, not the resource.
        meta = obj["metadata"]
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise conflict(
                rt.group,
                rt.kind,
                meta["name"],
                f"the UID in the precondition ({pre['uid']}) does not match the UID in record "
                f"({meta.get('uid')}). The object might have been deleted and then recreated",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise conflict(
                rt.group,
                rt.kind,
                meta["name"],
                f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not "
                f"match the ResourceVersion in record ({meta.get('resourceVersion')}). The "
                "object might have been modified",
            )

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        final = _copy(obj)
        final["metadata"]["resourceVersion"] = str(self.store.next_revision())
        self.store.remove(rt.storage_key, final)
        return final

    def _delete_response(self, rt: ResourceType, obj: Obj) -> Obj:
        if rt.kind in RETURN_DELETED_OBJECT_KINDS:
            return obj
        details: Obj = {"name": obj["metadata"]["name"]}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        details["uid"] = obj["metadata"].get("uid", "")
        return success_status(details)

    # helpers

    def _checked_body(self, rt: ResourceType, body: Any, handed_over: bool = False) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        obj: Obj = body if handed_over else jsoncodec.copy(body)
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind is None and api_version is None:
            obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
        elif kind != rt.kind or api_version != rt.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.api_version})"
                if api_version != rt.api_version
                else f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        if not isinstance(obj.get("metadata", {}), dict):
            raise bad_request("metadata must be an object")
        return obj


def _spec_of(obj: Obj) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _pod_still_terminating(rt: ResourceType, pod: Obj) -> bool:
    """A pod past its finalizers still waits for the kubelet unless its grace period is 0."""
    if rt.kind != "Pod":
        return False
    return int(pod["metadata"].get("deletionGracePeriodSeconds") or 0) > 0
