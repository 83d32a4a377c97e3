"""A set of simulated machines: their Node objects and one kubelet each.

    nodes = NodeSet(client, {"node-1": NodeShape(cpu="2"), "node-2": NodeShape()},
                    KubeletConfig(heartbeat_interval=1))
    await nodes.start()
    await nodes["node-1"].set_pressure("memory", available="87Mi", threshold="100Mi")

Node i gets the pod CIDR 10.244.<i+1>.0/24 and the address 172.18.0.<i+2>,
like a kind cluster. The kubelets share one pod watch (made with `client`);
`client_for(node)`, when given, supplies each kubelet's own client (identity).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace

from ..client import KubeClient
from .kubelet import Kubelet
from .kubeletconfig import KubeletConfig
from .nodestatus import NodeShape
from .runtime import Informer


class NodeSet:
    def __init__(
        self,
        client: KubeClient,
        nodes: Mapping[str, NodeShape] | Iterable[str],
        config: KubeletConfig | None = None,
        client_for: Callable[[str], KubeClient] | None = None,
    ) -> None:
        self.client = client
        shapes = dict(nodes) if isinstance(nodes, Mapping) else {n: NodeShape() for n in nodes}
        base = config or KubeletConfig()
        self.pods = Informer(client, "v1", "pods", "Pod")
        self.kubelets: dict[str, Kubelet] = {}
        for i, (name, shape) in enumerate(shapes.items()):
            own = replace(base, pod_cidr=f"10.244.{i + 1}.0/24", host_ip=f"172.18.0.{i + 2}")
            own_client = client_for(name) if client_for is not None else client
            self.kubelets[name] = Kubelet(own_client, name, own, shape, pods=self.pods)

    def __getitem__(self, name: str) -> Kubelet:
        return self.kubelets[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.kubelets)

    async def start(self) -> None:
        await self.pods.start()
        await asyncio.gather(*(k.start() for k in self.kubelets.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(k.stop() for k in self.kubelets.values()))
        await self.pods.stop()
