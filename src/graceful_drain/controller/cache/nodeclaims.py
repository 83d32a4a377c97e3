"""Karpenter's NodeClaims in the controller's cache: the resource, its index by node, and the
wait until this API server serves them to us.

They are optional: when the API server does not serve them (no Karpenter) or RBAC forbids
them, they are not read and no deadline is known; the cache asks again every
`NODECLAIMS_RECHECK_SECONDS`, so that Karpenter installed after graceful-drain is read
without a restart. What a NodeClaim says (its node, its termination deadline) is
decision/deadline.py's `NodeClaimInfo`.
"""

from __future__ import annotations

import asyncio

from lightkube.generic_resource import create_global_resource

from graceful_drain.controller.decision.deadline import KARPENTER_NODECLAIMS, NodeClaimInfo
from graceful_drain.kube.client import RawApi, error_detail, http_status
from graceful_drain.kube.informer import Informer
from graceful_drain.kube.meta import HTTP_FORBIDDEN, HTTP_NOT_FOUND
from graceful_drain.logs import get_logger

NODECLAIMS_BY_NODE = "node"
# Until NodeClaims are served to the controller (Karpenter not installed yet, or no RBAC for
# them), how often it asks again: Karpenter installed later is read without a restart.
NODECLAIMS_RECHECK_SECONDS = 60.0
_GROUP, _VERSION, _PLURAL = KARPENTER_NODECLAIMS
NodeClaim = create_global_resource(_GROUP, _VERSION, "NodeClaim", _PLURAL)
_log = get_logger("cache")


def claim_node(claim: NodeClaimInfo) -> str | None:
    """The index of NodeClaims by the node they stand for (none until it is known)."""
    return claim.node_name or None


async def run_once_served(raw: RawApi, informer: Informer[NodeClaimInfo], recheck: float) -> None:
    """Keep NodeClaims once this API server serves them to us. Until then (404: Karpenter
    not installed; 403: no RBAC for them) say so once and ask again every `recheck` seconds.
    Ends only when cancelled."""
    waiting = False
    while True:
        try:
            await raw.list_page(NodeClaim, None, limit=1)
        except Exception as error:
            if http_status(error) in (HTTP_NOT_FOUND, HTTP_FORBIDDEN):
                if not waiting:
                    _log.info(
                        "karpenter nodeclaims not read: no termination deadlines known",
                        detail=error_detail(error),
                        recheck_seconds=recheck,
                    )
                    waiting = True
                await asyncio.sleep(recheck)
                continue
            # anything else is transient: the informer retries with its back-off
        break
    if waiting:
        _log.info("karpenter nodeclaims served: termination deadlines read")
    await informer.run()
