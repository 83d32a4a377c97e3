"""Scenario files: a cluster, its workloads, and which drain client drains which node.

    name: eviction-dance
    nodes:
      - name: node-a
        capacity: {cpu: "2", memory: 4Gi}
        labels: {topology.kubernetes.io/zone: a}
        taints: [{key: dedicated, value: db, effect: NoSchedule}]
      - name: node-b
    controllers: [deployment, replicaset, disruption]    # optional: default all
    manifests:                                            # any kind kubesim serves
      - {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: ...}
    drains:
      - node: node-a
        client: kubectl                  # kubectl | karpenter | cluster-autoscaler
        after: 1s                        # once the measured Deployments are Ready
        parameters: {retry_interval: 5s} # the client's keyword parameters
    measure:
      namespace: default
      deployments: [web]                 # default: every Deployment in manifests

Pod behaviour (start and readiness delays, exit delays...) is declared with the
`sim.kubesim.io/*` annotations of `kubesim.cluster.behaviour` on pod templates.
Durations are Go-style ("1.5s", "200ms") or plain seconds. `load_scenario`
validates everything up front and names the offending field.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kubesim.types import Obj

from .apiserver.resources import ResourceRegistry
from .cluster.behaviour import parse_duration
from .drain import CLIENTS

T = TypeVar("T")

CAPACITY_KEYS = ("cpu", "memory", "pods", "ephemeral-storage")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Drain-client constructor parameters a scenario does not set: the client and the clocks.
NOT_PARAMETERS = frozenset({"self", "client", "clock", "wall_clock", "unix_time"})


class ScenarioError(ValueError):
    """A scenario that cannot be used; `field` is the path to what is wrong."""

    def __init__(self, field: str, message: str, source: str = "") -> None:
        self.field = field
        self.message = message
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{field}: {message}" if field else f"{where}{message}")


@dataclass(frozen=True)
class NodeSpec:
    name: str
    capacity: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True)
class DrainSpec:
    node: str
    client: str
    after: float = 0.0
    parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MeasureSpec:
    namespace: str
    deployments: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: tuple[NodeSpec, ...]
    manifests: tuple[Obj, ...]
    drains: tuple[DrainSpec, ...]
    measure: MeasureSpec
    description: str = ""
    controllers: tuple[str, ...] | None = None

    def deployment_replicas(self) -> dict[tuple[str, str], int]:
        """(namespace, name) -> spec.replicas of each Deployment in the manifests."""
        out = {}
        for obj in self.manifests:
            if obj.get("kind") == "Deployment" and obj.get("apiVersion") == "apps/v1":
                meta = obj["metadata"]
                replicas = (obj.get("spec") or {}).get("replicas", 1)
                out[(meta.get("namespace", "default"), meta["name"])] = int(replicas)
        return out


# --- field readers ----------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _expect(value: Any, kind: type[T], path: str, what: str) -> T:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ScenarioError(path, f"must be {what}, got {_type_name(value)}")
    return value


def _mapping(value: Any, path: str, known: tuple[str, ...] | None = None) -> Obj:
    out = _expect(value, dict, path, "a mapping")
    if known is not None:
        unknown = sorted(str(k) for k in out if k not in known)
        if unknown:
            where = f"{path}.{unknown[0]}" if path else unknown[0]
            raise ScenarioError(where, f"unknown field; known fields: {', '.join(known)}")
    return out


def _list(value: Any, path: str) -> list[Any]:
    """A list; an absent (None) value is an empty one."""
    return [] if value is None else _expect(value, list, path, "a list")


def _string(value: Any, path: str) -> str:
    text = _expect(value, str, path, "a string")
    if not text:
        raise ScenarioError(path, "must not be empty")
    return text


def _scalar_text(value: Any, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ScenarioError(path, f"must be a string or a number, got {_type_name(value)}")
    return str(value)


def _string_map(value: Any, path: str) -> dict[str, str]:
    return {str(k): _scalar_text(v, f"{path}.{k}") for k, v in _mapping(value, path).items()}


def _duration(value: Any, path: str) -> float:
    if isinstance(value, bool):
        raise ScenarioError(path, "must be a duration such as 5s or 100ms, got a boolean")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError:
            raise ScenarioError(path, f"invalid duration {value!r} (use e.g. 5s, 100ms)") from None
    else:
        raise ScenarioError(
            path, f"must be a duration such as 5s or 100ms, got {_type_name(value)}"
        )
    if seconds < 0:
        raise ScenarioError(path, "must not be negative")
    return seconds


# --- sections ---------------------------------------------------------------------------


def _node(value: Any, path: str) -> NodeSpec:
    raw = _mapping(value, path, ("name", "capacity", "labels", "taints", "unschedulable"))
    if "name" not in raw:
        raise ScenarioError(f"{path}.name", "is required")
    capacity = _string_map(raw.get("capacity", {}), f"{path}.capacity")
    for key in capacity:
        if key not in CAPACITY_KEYS:
            raise ScenarioError(
                f"{path}.capacity.{key}", f"unknown resource; known: {', '.join(CAPACITY_KEYS)}"
            )
    taints = []
    for i, taint in enumerate(_list(raw.get("taints"), f"{path}.taints")):
        where = f"{path}.taints[{i}]"
        t = _mapping(taint, where, ("key", "value", "effect"))
        effect = t.get("effect")
        if effect not in TAINT_EFFECTS:
            raise ScenarioError(f"{where}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}")
        entry = {"key": _string(t.get("key"), f"{where}.key"), "effect": effect}
        if t.get("value") is not None:
            entry["value"] = _scalar_text(t["value"], f"{where}.value")
        taints.append(entry)
    unschedulable = raw.get("unschedulable", False)
    return NodeSpec(
        name=_string(raw["name"], f"{path}.name"),
        capacity=capacity,
        labels=_string_map(raw.get("labels", {}), f"{path}.labels"),
        taints=tuple(taints),
        unschedulable=_expect(unschedulable, bool, f"{path}.unschedulable", "a boolean"),
    )


def _manifest(value: Any, path: str, resources: ResourceRegistry) -> Obj:
    obj = _mapping(value, path)
    api_version = _string(obj.get("apiVersion"), f"{path}.apiVersion")
    kind = _string(obj.get("kind"), f"{path}.kind")
    group = api_version.rpartition("/")[0]
    if resources.by_kind(group, kind) is None:
        raise ScenarioError(f"{path}.kind", f"kubesim does not serve {api_version} {kind}")
    meta = _mapping(obj.get("metadata"), f"{path}.metadata")
    _string(meta.get("name"), f"{path}.metadata.name")
    return obj


def drain_parameters(client: str) -> dict[str, Any]:
    """A drain client's settable parameters and their types (from its constructor)."""
    cls = CLIENTS[client]
    hints = typing.get_type_hints(cls.__init__)
    names = inspect.signature(cls.__init__).parameters
    return {name: hints[name] for name in names if name not in NOT_PARAMETERS}


def _parameter(value: Any, hint: Any, path: str) -> Any:
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in options:
        return None
    if bool in options:
        return _expect(value, bool, path, "a boolean")
    if int in options:
        return _expect(value, int, path, "an integer")
    if float in options:
        return _duration(value, path)
    if str in options:
        return _expect(value, str, path, "a string")
    raise ScenarioError(path, f"cannot be set from a scenario ({hint})")


def _drain(value: Any, path: str, node_names: tuple[str, ...]) -> DrainSpec:
    raw = _mapping(value, path, ("node", "client", "after", "parameters"))
    node = _string(raw.get("node"), f"{path}.node")
    if node not in node_names:
        raise ScenarioError(
            f"{path}.node", f"no node named {node!r}; nodes: {', '.join(node_names)}"
        )
    client = _string(raw.get("client"), f"{path}.client")
    if client not in CLIENTS:
        raise ScenarioError(f"{path}.client", f"unknown drain client; known: {', '.join(CLIENTS)}")
    known = drain_parameters(client)
    parameters = {}
    for key, item in _mapping(raw.get("parameters", {}), f"{path}.parameters").items():
        where = f"{path}.parameters.{key}"
        if key not in known:
            raise ScenarioError(
                where, f"unknown parameter of the {client} client; known: {', '.join(known)}"
            )
        parameters[key] = _parameter(item, known[key], where)
    after = _duration(raw.get("after", 0), f"{path}.after")
    return DrainSpec(node=node, client=client, after=after, parameters=parameters)


def _measure(value: Any, deployments: Mapping[tuple[str, str], int]) -> MeasureSpec:
    raw = _mapping({} if value is None else value, "measure", ("namespace", "deployments"))
    namespace = _string(raw.get("namespace", "default"), "measure.namespace")
    available = sorted(name for ns, name in deployments if ns == namespace)
    if "deployments" not in raw:
        return MeasureSpec(namespace, tuple(available))
    names = []
    for i, item in enumerate(_list(raw["deployments"], "measure.deployments")):
        name = _string(item, f"measure.deployments[{i}]")
        if name not in available:
            raise ScenarioError(
                f"measure.deployments[{i}]",
                f"no Deployment {name!r} in namespace {namespace!r} among the manifests",
            )
        names.append(name)
    return MeasureSpec(namespace, tuple(names))


def _each(items: list[Any], path: str, read: Callable[[Any, str], T]) -> tuple[T, ...]:
    return tuple(read(item, f"{path}[{i}]") for i, item in enumerate(items))


def parse_scenario(data: Any, known_controllers: tuple[str, ...] | None = None) -> Scenario:
    """Validate a scenario document; `known_controllers` checks the `controllers` list."""
    fields = ("name", "description", "nodes", "controllers", "manifests", "drains", "measure")
    raw = _mapping(data, "", fields)
    name = _string(raw.get("name", "scenario"), "name")
    description = raw.get("description", "")
    _expect(description, str, "description", "a string")
    nodes = _each(_list(raw.get("nodes"), "nodes"), "nodes", _node)
    names = tuple(n.name for n in nodes)
    for i, n in enumerate(nodes):
        if n.name in names[:i]:
            raise ScenarioError(f"nodes[{i}].name", f"duplicate node name {n.name!r}")
    resources = ResourceRegistry()
    manifests = _each(
        _list(raw.get("manifests"), "manifests"), "manifests",
        lambda item, path: _manifest(item, path, resources),
    )  # fmt: skip
    drains = _each(
        _list(raw.get("drains"), "drains"), "drains",
        lambda item, path: _drain(item, path, names),
    )  # fmt: skip
    controllers = None
    if raw.get("controllers") is not None:
        listed = _list(raw["controllers"], "controllers")
        controllers = tuple(_string(c, f"controllers[{i}]") for i, c in enumerate(listed))
        for i, c in enumerate(controllers):
            if known_controllers is not None and c not in known_controllers:
                raise ScenarioError(
                    f"controllers[{i}]", f"unknown component; known: {', '.join(known_controllers)}"
                )
    scenario = Scenario(
        name=name, description=description, nodes=nodes, manifests=manifests, drains=drains,
        measure=MeasureSpec("default", ()), controllers=controllers,
    )  # fmt: skip
    measure = _measure(raw.get("measure"), scenario.deployment_replicas())
    return Scenario(
        name=name, description=description, nodes=nodes, manifests=manifests, drains=drains,
        measure=measure, controllers=controllers,
    )  # fmt: skip


def load_scenario(path: Path, known_controllers: tuple[str, ...] | None = None) -> Scenario:
    """Read and validate a scenario file. Raises ScenarioError (naming file and field)."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ScenarioError("", f"cannot read scenario file: {err.strerror}", str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ScenarioError("", f"not valid YAML: {err}", str(path)) from None
    try:
        return parse_scenario(data, known_controllers)
    except ScenarioError as err:
        raise ScenarioError(err.field, err.message, str(path)) from None
