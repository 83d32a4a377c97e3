"""`python -m realcluster build|serve`: build the binaries, or run a cluster until Ctrl-C
(SIGINT) or SIGTERM, which stop every process `serve` started.

Both signals get a handler of their own: a shell starts a background job with SIGINT
ignored, and Python installs no KeyboardInterrupt handler for a signal ignored at start,
so `kill -INT` of a backgrounded `serve` used to leave the control plane running."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

import yaml

from realcluster.addons import Descheduler, Karpenter, node_pool
from realcluster.binaries import BinariesUnavailable, ensure_built
from realcluster.cluster import ClusterError, RealCluster


class Stopped(Exception):
    """SIGINT or SIGTERM arrived: unwind, stopping every child."""


def _stop(signum: int, _frame: FrameType | None) -> None:
    # A second signal while the children stop must not cut their stop short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m realcluster")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build (or reuse) the binaries, print their folder")
    serve = sub.add_parser("serve", help="run etcd, kube-apiserver, controller manager, "
                           "scheduler and kwok nodes on 127.0.0.1 until Ctrl-C")  # fmt: skip
    serve.add_argument("--nodes", default="node-a,node-b",
                       help="comma-separated kwok node names (default: node-a,node-b)")  # fmt: skip
    serve.add_argument("--workdir", type=Path, default=None,
                       help="folder for certificates, logs, etcd data and the kubeconfig "
                       "(default: a new temporary folder)")  # fmt: skip
    serve.add_argument("--karpenter", action="store_true",
                       help="also run Karpenter's KWOK provider, with a NodePool `default` "
                       "of KWOK nodes for pods the listed nodes cannot hold")  # fmt: skip
    serve.add_argument("--descheduler-policy", type=Path, default=None,
                       help="also run the descheduler every 10 s with this policy "
                       "(a DeschedulerPolicy YAML file)")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        bin_dir = ensure_built()
    except BinariesUnavailable as error:
        print(f"realcluster: {error}", file=sys.stderr)
        return 2
    if args.command == "build":
        print(bin_dir)
        return 0
    nodes = [n.strip() for n in args.nodes.split(",") if n.strip()]
    if not nodes:
        print("realcluster: --nodes names no node", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="realcluster-"))
    if args.workdir is not None and not workdir.parent.is_dir():
        print(f"realcluster: --workdir {workdir}: no such parent folder", file=sys.stderr)
        return 2
    policy = None
    if args.descheduler_policy is not None:
        try:
            policy = yaml.safe_load(args.descheduler_policy.read_text())
        except (OSError, yaml.YAMLError) as error:
            print(f"realcluster: --descheduler-policy: {error}", file=sys.stderr)
            return 2
        if not isinstance(policy, dict):
            print("realcluster: --descheduler-policy: not a YAML object", file=sys.stderr)
            return 2
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        with ExitStack() as running:
            cluster = running.enter_context(RealCluster(workdir, bin_dir, nodes=nodes))
            if args.karpenter:
                karpenter = running.enter_context(Karpenter(cluster, bin_dir))
                karpenter.apply_node_pool(node_pool("default", taint=False,
                                                    consolidate_after="30s"))  # fmt: skip
            if policy is not None:
                running.enter_context(Descheduler(cluster, bin_dir, policy, interval="10s"))
            print(cluster.kubeconfig_path, flush=True)
            print(f"logs and audit log in {workdir}; Ctrl-C stops the cluster", file=sys.stderr)
            while True:
                signal.pause()
    except ClusterError as error:
        print(f"realcluster: {error}", file=sys.stderr)
        return 1
    except Stopped:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
