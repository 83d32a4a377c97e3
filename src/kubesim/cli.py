"""`kubesim serve`: run the simulated control plane until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from .sim import KubeSim


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubesim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the API over HTTPS on loopback")
    serve.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path("kubesim.kubeconfig"),
        help="where to write the admin kubeconfig (default: %(default)s)",
    )
    serve.add_argument("--port", type=int, default=0, help="TCP port (default: any free port)")
    serve.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    serve.add_argument(
        "--server-version",
        type=int,
        default=32,
        metavar="MINOR",
        help="the Kubernetes minor version /version reports (default: %(default)s)",
    )
    return parser  # fmt: skip


async def _serve(args: argparse.Namespace) -> int:
    sim = KubeSim(
        host=args.host,
        port=args.port,
        server_minor_version=args.server_version,
        kubeconfig_path=args.kubeconfig.resolve(),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with sim:
        print(sim.kubeconfig_path, flush=True)
        await stop.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.port < 0 or args.port > 65535:
        print(f"kubesim: --port must be between 0 and 65535, got {args.port}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(args))
    except OSError as exc:
        print(f"kubesim: cannot serve: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
