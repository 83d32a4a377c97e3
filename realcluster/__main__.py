"""`python -m realcluster build|serve`: build the binaries, or run a cluster until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

from realcluster.binaries import BinariesUnavailable, ensure_built
from realcluster.cluster import ClusterError, RealCluster


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
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        with RealCluster(workdir, bin_dir, nodes=nodes) as cluster:
            print(cluster.kubeconfig_path, flush=True)
            print(f"logs and audit log in {workdir}; Ctrl-C stops the cluster", file=sys.stderr)
            signal.pause()
    except ClusterError as error:
        print(f"realcluster: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
