"""Controller references: building them, and claiming objects like ControllerRefManager.

After apimachinery's `metav1.NewControllerRef` / `GetControllerOf` and
pkg/controller/controller_ref_manager.go (`ClaimObject`): a controller keeps the
objects it owns that its selector still matches, releases the ones it no longer
matches, and adopts matching orphans, unless it or they are being deleted.
Writes are PUTs carrying the cached resourceVersion, so a stale cache gets a 409.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from kubesim import jsoncodec
from kubesim.types import Obj

from ..client import ApiStatusError, KubeClient, resource_path


def new_controller_ref(owner: Obj) -> Obj:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(obj: Obj) -> Obj | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def controlled_by(obj: Obj, owner: Obj) -> bool:
    ref = controller_of(obj)
    return ref is not None and ref.get("uid") == owner["metadata"].get("uid")


def ref_group(ref: Obj) -> str:
    group, _, _ = str(ref.get("apiVersion", "")).rpartition("/")
    return group


@dataclass
class Claim:
    """What ClaimObject decides for each candidate."""

    owned: list[Obj] = field(default_factory=list)
    adopt: list[Obj] = field(default_factory=list)
    release: list[Obj] = field(default_factory=list)


def plan_claim(owner: Obj, candidates: Sequence[Obj], matches: Callable[[Obj], bool]) -> Claim:
    claim = Claim()
    owner_uid = owner["metadata"].get("uid")
    owner_deleting = bool(owner["metadata"].get("deletionTimestamp"))
    for obj in candidates:
        ref = controller_of(obj)
        if ref is not None:
            if ref.get("uid") != owner_uid:
                continue
            if matches(obj):
                claim.owned.append(obj)
            elif not owner_deleting:
                claim.release.append(obj)
            continue
        if owner_deleting or not matches(obj) or obj["metadata"].get("deletionTimestamp"):
            continue
        claim.adopt.append(obj)
    return claim


def _path(obj: Obj, plural: str) -> str:
    meta = obj["metadata"]
    return resource_path(obj["apiVersion"], plural, meta.get("namespace"), meta["name"])


async def adopt(client: KubeClient, obj: Obj, plural: str, owner: Obj) -> Obj | None:
    """Add `owner` as controller of `obj`; None if `obj` is gone."""
    body = jsoncodec.copy(obj)
    refs = body["metadata"].setdefault("ownerReferences", [])
    refs.append(new_controller_ref(owner))
    try:
        adopted = await client.replace(_path(obj, plural), body)
    except ApiStatusError as err:
        if err.code == 404:
            return None
        raise
    adopted.setdefault("apiVersion", obj["apiVersion"])
    adopted.setdefault("kind", obj["kind"])
    return adopted


async def release(client: KubeClient, obj: Obj, plural: str, owner_uid: str) -> None:
    body = jsoncodec.copy(obj)
    refs = body["metadata"].get("ownerReferences") or []
    body["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != owner_uid]
    try:
        await client.replace(_path(obj, plural), body)
    except ApiStatusError as err:
        if err.code not in (404, 422):
            raise


async def claim(
    client: KubeClient,
    owner: Obj,
    candidates: Sequence[Obj],
    plural: str,
    matches: Callable[[Obj], bool],
    can_adopt: Callable[[], Awaitable[bool]],
) -> list[Obj]:
    """Run ClaimObject over `candidates`: returns what `owner` controls afterwards."""
    plan = plan_claim(owner, candidates, matches)
    owned = list(plan.owned)
    for obj in plan.release:
        await release(client, obj, plural, str(owner["metadata"]["uid"]))
    if plan.adopt and await can_adopt():
        for obj in plan.adopt:
            adopted = await adopt(client, obj, plural, owner)
            if adopted is not None:
                owned.append(adopted)
    return owned


async def fresh_and_alive(client: KubeClient, owner: Obj, plural: str) -> bool:
    """RecheckDeletionTimestamp: the live owner is the same object and not being deleted."""
    try:
        live = await client.get(_path(owner, plural))
    except ApiStatusError:
        return False
    meta = live.get("metadata") or {}
    return bool(
        meta.get("uid") == owner["metadata"].get("uid") and not meta.get("deletionTimestamp")
    )
