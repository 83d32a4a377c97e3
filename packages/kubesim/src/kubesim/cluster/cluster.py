"""`Cluster`: kubesim's built-in components, started against a running `KubeSim`.

    async with KubeSim() as sim, Cluster(sim, nodes=["node-a", "node-b"]) as cluster:
        ...  # pods are scheduled and run on simulated kubelets, Deployments roll out,
        ...  # ReplicaSets keep their pods, PDB status is computed
        cluster.nodes["node-a"]  # the Kubelet of node-a (pressure, ...)

Every component talks to the API server over HTTP with its own client and identity, as
the real ones do (on kubesim's private Unix socket: `KubeSim.local_client`). Components are
switchable by name and come from a registry of factories, so adding one is one entry in
`COMPONENTS`:

    COMPONENTS["scheduler"] = ComponentSpec(lambda ctx: Scheduler(ctx.client()),
                                            user="system:kube-scheduler", groups=())
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kubesim.lifecycle import Lifecycle

from ..client import KubeClient
from .cronjob import CronJobController
from .daemonset import DaemonSetController
from .deployment import DeploymentController
from .disruption import DisruptionController
from .endpoints import EndpointsController
from .job import JobController
from .kubeletconfig import KubeletConfig
from .node_lifecycle import NodeLifecycleController
from .nodeset import NodeSet
from .nodestatus import NodeShape
from .replicaset import ReplicaSetController
from .runtime import SharedInformers
from .scheduler import Scheduler
from .serviceaccounts import ServiceAccountsController
from .statefulset import StatefulSetController

if TYPE_CHECKING:
    from ..sim import KubeSim

log = logging.getLogger(__name__)

CONTROLLER_MANAGER = "system:kube-controller-manager"


class Component(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class ComponentContext:
    """What a factory gets: the simulator, and clients with the component's identity."""

    sim: KubeSim
    name: str
    user: str
    groups: tuple[str, ...]
    _clients: list[KubeClient] = field(default_factory=list)

    def client(self, user: str | None = None, groups: tuple[str, ...] | None = None) -> KubeClient:
        """A new client authenticated as `user` (default: the component's identity).

        Per-node components (kubelets) ask for one client per node identity.
        """
        who = user or self.user
        token = self.sim.user_token(who, self.groups if groups is None else groups)
        agent = f"kubesim/v1.{self.sim.server.minor_version}.0 ({who}) {self.name}"
        client = self.sim.local_client(token, agent)
        self._clients.append(client)
        return client

    async def close(self) -> None:
        for client in self._clients:
            await client.close()
        self._clients.clear()


Factory = Callable[[ComponentContext], Component]


@dataclass(frozen=True)
class ComponentSpec:
    factory: Factory
    user: str = CONTROLLER_MANAGER
    groups: tuple[str, ...] = ("system:masters",)


COMPONENTS: dict[str, ComponentSpec] = {
    "deployment": ComponentSpec(lambda ctx: DeploymentController(ctx.client())),
    "replicaset": ComponentSpec(lambda ctx: ReplicaSetController(ctx.client())),
    "statefulset": ComponentSpec(lambda ctx: StatefulSetController(ctx.client())),
    "daemonset": ComponentSpec(lambda ctx: DaemonSetController(ctx.client())),
    "job": ComponentSpec(lambda ctx: JobController(ctx.client())),
    "cronjob": ComponentSpec(lambda ctx: CronJobController(ctx.client())),
    "disruption": ComponentSpec(lambda ctx: DisruptionController(ctx.client())),
    "endpoints": ComponentSpec(lambda ctx: EndpointsController(ctx.client())),
    "serviceaccount": ComponentSpec(lambda ctx: ServiceAccountsController(ctx.client())),
    "node-lifecycle": ComponentSpec(lambda ctx: NodeLifecycleController(ctx.client())),
    "scheduler": ComponentSpec(lambda ctx: Scheduler(ctx.client()), user="system:kube-scheduler"),
}


class Cluster(Lifecycle):
    """Starts the selected components (all registered ones by default) and stops them."""

    def __init__(
        self,
        sim: KubeSim,
        controllers: Iterable[str] | None = None,
        registry: Mapping[str, ComponentSpec] | None = None,
        nodes: Mapping[str, NodeShape] | Iterable[str] = (),
        kubelet_config: KubeletConfig | None = None,
    ) -> None:
        """`nodes` get one simulated kubelet each, identified as `system:node:<name>`."""
        self.sim = sim
        self.registry = dict(COMPONENTS if registry is None else registry)
        wanted = set(self.registry) if controllers is None else set(controllers)
        unknown = sorted(wanted - set(self.registry))
        if unknown:
            raise ValueError(f"unknown components {unknown}; known: {sorted(self.registry)}")
        # Registry order: deterministic start (and reverse stop) order.
        self.enabled = [name for name in self.registry if name in wanted]
        self.components: dict[str, Component] = {}
        self._contexts: list[ComponentContext] = []
        # Per identity, as kube-controller-manager's controllers share one informer factory.
        self._shared: dict[tuple[str, tuple[str, ...]], SharedInformers] = {}
        self._node_shapes = dict(nodes) if isinstance(nodes, Mapping) else list(nodes)
        self._kubelet_config = kubelet_config
        self.nodes: NodeSet | None = None

    async def start(self) -> Cluster:
        try:
            for name in self.enabled:
                spec = self.registry[name]
                ctx = ComponentContext(self.sim, name, spec.user, spec.groups)
                self._contexts.append(ctx)
                with self._shared_informers(spec).building():
                    component = spec.factory(ctx)
                await component.start()
                self.components[name] = component
            if self._node_shapes:
                ctx = ComponentContext(self.sim, "kubelet", "system:node", ("system:masters",))
                self._contexts.append(ctx)
                self.nodes = NodeSet(
                    ctx.client(), self._node_shapes, self._kubelet_config,
                    client_for=lambda node: ctx.client(f"system:node:{node}"),
                )  # fmt: skip
                await self.nodes.start()
        except BaseException:
            await self.stop()
            raise
        return self

    def _shared_informers(self, spec: ComponentSpec) -> SharedInformers:
        identity = (spec.user, spec.groups)
        shared = self._shared.get(identity)
        if shared is None:
            ctx = ComponentContext(self.sim, "shared-informers", spec.user, spec.groups)
            self._contexts.append(ctx)
            shared = self._shared[identity] = SharedInformers(ctx.client())
        return shared

    async def stop(self) -> None:
        if self.nodes is not None:
            await self.nodes.stop()
            self.nodes = None
        for name in reversed(list(self.components)):
            try:
                await self.components[name].stop()
            except Exception:
                log.exception("stopping %s failed", name)
        self.components.clear()
        for shared in self._shared.values():
            await shared.stop()
        self._shared.clear()
        for ctx in self._contexts:
            await ctx.close()
        self._contexts.clear()
