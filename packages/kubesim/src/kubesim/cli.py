"""`kubesim serve`: run a simulated cluster until SIGINT/SIGTERM.

By default a cluster: the API server, the built-in controllers, the scheduler and
`--nodes` (2) simulated kubelets, each with its Ready Node. `--bare` serves the API
server alone. With `--scenario FILE` the scenario's nodes, controllers and manifests
instead, and then (unless `--setup-only`) its drains, reporting each on stderr.
Once all that is in place it prints one line on stdout saying what it started, which
ends with the kubeconfig's path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import signal
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from kubesim.lifecycle import cancel_and_wait

from .cluster.cluster import COMPONENTS, Cluster
from .scenario import Scenario, ScenarioError, load_scenario
from .scenario_runner import ScenarioRun
from .sim import KubeSim

DEFAULT_NODES = 2
MAX_NODES = 100


def node_names(count: int) -> list[str]:
    """The default cluster's nodes: node-1 ... node-N."""
    return [f"node-{i}" for i in range(1, count + 1)]


def started_line(url: str, kubeconfig: Path, started: str) -> str:
    """The one line `kubesim serve` prints once it is ready."""
    return f"kubesim: serving {url}: {started}; kubeconfig: {kubeconfig}"


def described(names: list[str], controllers: list[str]) -> str:
    """A cluster of these nodes and components (Cluster.enabled), as the line says it."""
    plural = "" if len(names) == 1 else "s"
    parts = [f"{len(names)} Ready node{plural} ({', '.join(names)})" if names else "no nodes"]
    if "scheduler" in controllers:
        parts.append("the scheduler")
    if others := [name for name in controllers if name != "scheduler"]:
        parts.append(f"controllers {', '.join(others)}")
    return "a cluster: the API server, " + ", ".join(parts)


def _version() -> str:
    try:
        return version("kubesim")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0.0.0+unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubesim", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the API over HTTPS on loopback")
    serve.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path("kubesim.kubeconfig"),
        help="where to write the admin kubeconfig (default: %(default)s)",
    )
    serve.add_argument("--port", type=int, default=0, help="TCP port (default: any free port)")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="loopback address to bind (default: %(default)s; others are refused)",
    )
    serve.add_argument(
        "--server-version",
        type=int,
        default=32,
        metavar="MINOR",
        help="the Kubernetes minor version /version reports (default: %(default)s)",
    )
    serve.add_argument(
        "--route-service",
        action="append",
        default=[],
        metavar="NAMESPACE/NAME[:PORT]=LOCAL_PORT",
        help="send what a webhook configuration addresses to Service NAMESPACE/NAME (port PORT, "
        "default 443) to 127.0.0.1:LOCAL_PORT, e.g. graceful-drain/graceful-drain-webhook=8443 "
        "for `graceful-drain controller --webhook-port 8443`; kubesim has no cluster network, "
        "so a Service is reachable only this way (repeatable)",
    )
    serve.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE",
        help="a scenario YAML file: set up its nodes and workloads, then run its drains",
    )
    serve.add_argument(
        "--nodes",
        type=int,
        metavar="N",
        help=f"how many simulated nodes (kubelets, Ready Nodes) the cluster has "
        f"(default: {DEFAULT_NODES}; 1-{MAX_NODES})",
    )
    serve.add_argument(
        "--bare",
        action="store_true",
        help="the API server alone: no controllers, no scheduler, no nodes",
    )
    serve.add_argument(
        "--setup-only",
        action="store_true",
        help="with --scenario: set up the nodes and workloads but do not run the drains",
    )
    return parser  # fmt: skip


def _route(text: str) -> tuple[str, str, int, int]:
    """NAMESPACE/NAME[:PORT]=LOCAL_PORT -> (namespace, name, port, local port)."""
    service, equals, local = text.partition("=")
    namespace, slash, name_port = service.partition("/")
    name, colon, port = name_port.partition(":")
    if not (equals and slash and namespace and name and local.isdigit()) or (
        colon and not port.isdigit()
    ):
        raise ValueError(f"{text!r} is not NAMESPACE/NAME[:PORT]=LOCAL_PORT")
    numbers = (int(port) if colon else 443, int(local))
    if not all(0 < n < 65536 for n in numbers):
        raise ValueError(f"{text!r}: ports are 1-65535")
    return namespace, name, numbers[0], numbers[1]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _run_drains(run: ScenarioRun) -> None:
    await run.wait_ready()
    _say(f"kubesim: scenario {run.scenario.name}: workloads Ready")
    for spec in run.scenario.drains:
        await asyncio.sleep(spec.after)
        outcome = await run.run_drain(spec)
        for entry in outcome.result.log:
            _say(f"  {outcome.result.client} [{entry.at - outcome.started:7.2f}s] {entry.text}")
        for line in run.report_lines([outcome]):
            _say(f"kubesim: {line}")


async def _serve(args: argparse.Namespace, scenario: Scenario | None) -> int:
    sim = KubeSim(
        host=args.host,
        port=args.port,
        server_minor_version=args.server_version,
        kubeconfig_path=args.kubeconfig.resolve(),
        kubernetes_service=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def compact() -> None:
        sim.store.compact()
        _say(f"kubesim: history compacted at revision {sim.store.revision}")

    # As etcd's compaction: a watch resumed from an older resourceVersion gets 410 Gone.
    loop.add_signal_handler(signal.SIGUSR1, compact)
    logging.basicConfig(level=logging.WARNING, format="kubesim: %(message)s", stream=sys.stderr)
    async with sim, contextlib.AsyncExitStack() as stack:
        for namespace, name, port, local_port in args.routes:
            sim.webhook_services.register(namespace, name, port, "127.0.0.1", local_port)
        drains: asyncio.Task[None] | None = None
        if scenario is not None:
            run = await stack.enter_async_context(ScenarioRun(sim, scenario))
            if not args.setup_only:
                drains = loop.create_task(_run_drains(run), name="scenario-drains")
            started = f"scenario {scenario.name}, " + described(
                list(run.cluster.nodes or ()), run.cluster.enabled
            )
        elif args.bare:
            started = "the API server alone (--bare: no controllers, scheduler or nodes)"
        else:
            cluster = await stack.enter_async_context(Cluster(sim, nodes=node_names(args.nodes)))
            started = described(list(cluster.nodes or ()), cluster.enabled)
        print(started_line(sim.url, sim.kubeconfig_path, started), flush=True)
        await stop.wait()
        if drains is not None:
            await cancel_and_wait(drains)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.port < 0 or args.port > 65535:
        print(f"kubesim: --port must be between 0 and 65535, got {args.port}", file=sys.stderr)
        return 2
    try:
        args.routes = [_route(text) for text in args.route_service]
    except ValueError as err:
        print(f"kubesim: --route-service: {err}", file=sys.stderr)
        return 2
    if not _is_loopback(args.host):
        print(f"kubesim: --host must be a loopback address (127.0.0.0/8 or ::1), got "
              f"{args.host!r}: kubesim is a test cluster with an admin token in a file, "
              "never to be reachable from another machine", file=sys.stderr)  # fmt: skip
        return 2
    if not args.kubeconfig.resolve().parent.is_dir():
        print(f"kubesim: --kubeconfig {args.kubeconfig}: the folder "
              f"{args.kubeconfig.resolve().parent} does not exist", file=sys.stderr)  # fmt: skip
        return 2
    if args.scenario is not None and (args.bare or args.nodes is not None):
        print("kubesim: --scenario sets up its own nodes and controllers: drop --nodes and "
              "--bare", file=sys.stderr)  # fmt: skip
        return 2
    if args.bare and args.nodes is not None:
        print("kubesim: --bare serves no nodes: drop --nodes", file=sys.stderr)
        return 2
    if args.nodes is None:
        args.nodes = DEFAULT_NODES
    elif not 1 <= args.nodes <= MAX_NODES:
        print(f"kubesim: --nodes must be between 1 and {MAX_NODES}, got {args.nodes} "
              "(--bare for the API server alone)", file=sys.stderr)  # fmt: skip
        return 2
    scenario = None
    if args.scenario is not None:
        if not args.scenario.is_file():
            print(f"kubesim: scenario file not found: {args.scenario}", file=sys.stderr)
            return 2
        try:
            scenario = load_scenario(args.scenario, tuple(COMPONENTS))
        except ScenarioError as err:
            print(f"kubesim: invalid scenario: {err}", file=sys.stderr)
            return 2
    elif args.setup_only:
        print("kubesim: --setup-only needs --scenario", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(args, scenario))
    except OSError as exc:
        print(f"kubesim: cannot serve: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
