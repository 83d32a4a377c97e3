"""The webhook server's instructions per request, counted by valgrind (callgrind): a figure the
machine's load does not move, for a change too small to see in CPU seconds on shared cores.

    PYTHONPATH=src .venv/bin/python -m bench.webhook.instructions [REF ...]

For this checkout's `src/`, one server process runs under `valgrind --tool=callgrind`: the
webhook as servers.py serves it (`app.webhook_site`, the informers' list path into a
`ClusterCache`, JSON log line, metrics; a smaller population, POPULATION, since valgrind runs
it some fifty times slower), plus the canned path (the reference's answer on the webhook's own
server: the stack alone). Each REF's `src/` (exported with `git archive`) is served by
baseline_server.py, as `--baseline` serves it (its main route only; its cache filled from the
same objects, pickled by this process). Then the aiohttp reference server the same way. A
client outside valgrind (32 keep-alive TLS connections, one request in flight each, the
bench's request mix) warms each path up, the counters are zeroed (`callgrind_control -z`),
exactly COUNT requests are sent, and the counters dumped: their total over COUNT is the
figure. Python's allocator is left as in production (pymalloc). Without valgrind it says so
and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.baseline import exported
from bench.procs import ROOT
from bench.webhook.population import PopulationSpec

POPULATION = PopulationSpec(deployments=400, pods=2_000, namespaces=4)
CONCURRENCY = 32
WARM = 640  # requests before the counters are zeroed
COUNT = 1_920  # requests counted
START_SECONDS = 1_800.0  # valgrind's start of a server (imports and the cache's fill)
WEBHOOK, CANNED, REFERENCE = "webhook", "canned", "reference"


async def _serve(info: Path, kind: str) -> None:
    from bench.webhook import breakdown, population, servers
    from graceful_drain.controller.app import HttpSite, webhook_site
    from graceful_drain.controller.serving.metrics import Metrics
    from graceful_drain.controller.serving.webhook import WEBHOOK_PATH, EvictionWebhook
    from graceful_drain.controller.tls.context import ReloadingTLS, server_context
    from kubesim.pki import CertificateAuthority

    ca = CertificateAuthority("bench-ca")
    pair = ca.issue_server(["127.0.0.1"], common_name="bench-webhook")
    tls_dir = Path(tempfile.mkdtemp(prefix="bench-instructions-"))
    cert, key = tls_dir / "tls.crt", tls_dir / "tls.key"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    prepared = population.prepared_requests(POPULATION, population.plan(POPULATION))
    paths = {WEBHOOK: WEBHOOK_PATH, CANNED: breakdown.CANNED_PATH}
    mismatches: list[str] = []
    if kind == REFERENCE:
        context = server_context()
        context.load_cert_chain(cert, key)
        reference = HttpSite("reference", servers.reference_app(), "127.0.0.1", 0, context)
        await reference.start()
        port, paths = reference.port, {REFERENCE: WEBHOOK_PATH}
    else:
        config = servers.decision_config()
        cache = await servers.filled_cache(POPULATION, config)
        webhook = EvictionWebhook(cache, servers.InstantPatcher(), config=config,
                                  metrics=Metrics())  # fmt: skip
        mismatches = await servers.verify_reasons(webhook, prepared)
        tls = ReloadingTLS(cert, key)
        await tls.start()
        routes = {WEBHOOK_PATH: webhook.answer, breakdown.CANNED_PATH: servers.canned_answer}
        own = webhook_site(routes, "127.0.0.1", 0, tls.context)
        await own.start()
        port = own.port
    shutil.rmtree(tls_dir)
    written = info.with_suffix(".tmp")
    written.write_text(json.dumps({
        "port": port, "ca": ca.cert_pem.decode(), "paths": paths, "mismatches": mismatches,
        "bodies": [request.body.decode() for request in prepared],
    }))  # fmt: skip
    written.rename(info)
    await asyncio.Event().wait()  # until terminated


async def _load(info_file: str, path: str, warm: int, count: int) -> None:
    """Warm up, say "warm", wait for a line, send `count` requests, say "done", wait."""
    from bench.webhook.loadgen import HttpConnection, request_bytes

    loop = asyncio.get_running_loop()
    info = json.loads(await loop.run_in_executor(None, Path(info_file).read_text))
    context = ssl.create_default_context(cadata=info["ca"])
    payloads = [request_bytes("127.0.0.1", info["port"], path, body.encode())
                for body in info["bodies"]]  # fmt: skip
    connections = []
    for _ in range(CONCURRENCY):
        _, protocol = await loop.create_connection(
            HttpConnection, "127.0.0.1", info["port"], ssl=context
        )
        connections.append(protocol)
    failed = 0

    async def send(index: int, connection: HttpConnection, requests: int) -> None:
        nonlocal failed
        position = (index * 7919) % len(payloads)
        for _ in range(requests):
            status, _ = await connection.send(payloads[position])
            failed += status != 200
            position = (position + 1) % len(payloads)

    for stage, requests in (("warm", warm), ("done", count)):
        if stage == "done":
            await loop.run_in_executor(None, sys.stdin.readline)
        await asyncio.gather(*(send(index, connection, requests // CONCURRENCY)
                               for index, connection in enumerate(connections)))  # fmt: skip
        print(stage, failed, flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)


def _total(dump: Path) -> int:
    found = re.search(r"^(?:summary|totals): (\d+)", dump.read_text(errors="replace"), re.M)
    if found is None:
        raise RuntimeError(f"no total in {dump}")
    return int(found.group(1))


def count(label: str, folders: list[Path], kind: str, scratch: Path) -> dict[str, float]:
    """k instructions per request on each path of one server (`kind`: webhook or reference),
    the product imported from `folders`."""
    python = sys.executable
    work = scratch / f"{label}-{kind}"
    work.mkdir()
    info = work / "info.json"
    path = os.pathsep.join([*map(str, folders), str(ROOT / "packages/kubesim/src"), str(ROOT)])
    env = dict(os.environ, PYTHONPATH=path)
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.out",
         python, "-m", "bench.webhook.instructions", "serve", str(info), kind],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=(work / "server.log").open("w"),
    )  # fmt: skip
    figures: dict[str, float] = {}
    try:
        deadline = time.monotonic() + START_SECONDS
        while not info.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{label} {kind} server did not start: see {work}/server.log")
            time.sleep(1)
        served = json.loads(info.read_text())
        if served["mismatches"]:
            raise RuntimeError(f"{label}: decisions differ: {served['mismatches'][:3]}")
        for name, route in served["paths"].items():
            figures[name] = _counted(label, name, server.pid, info, route, work)
    finally:
        server.terminate()
        server.wait()
    return figures


def count_baseline(ref: str, scratch: Path) -> dict[str, float]:
    """k instructions per request of REF's webhook, served by baseline_server.py."""
    from bench.webhook import baseline_server, population
    from bench.webhook.servers import raw_nodes
    from kubesim.pki import CertificateAuthority

    work = scratch / f"{ref}-baseline"
    work.mkdir()
    layout = population.plan(POPULATION)
    sources = {
        "Pod": population.raw_pods(layout, POPULATION),
        "ReplicaSet": population.raw_replicasets(layout),
        "Deployment": population.raw_deployments(layout, datetime.now(UTC)),
        "Node": iter(raw_nodes(population.raw_pods(layout, POPULATION))),
    }
    files = {}
    for kind, items in sources.items():
        files[kind] = str(work / f"{kind}.pickle")
        baseline_server.write_pages(items, Path(files[kind]))
    ca = CertificateAuthority("bench-ca")
    pair = ca.issue_server(["127.0.0.1"], common_name="bench-webhook")
    prepared = population.prepared_requests(POPULATION, layout)
    with exported(ref) as folders:
        options = baseline_server.BaselineOptions(
            tuple(map(str, folders)), pair.cert_pem, pair.key_pem, files,
            population.ROLLOUT_TIMEOUT, population.ENABLED_ANNOTATION,
        )  # fmt: skip
        parent, child = multiprocessing.get_context("spawn").Pipe()
        descriptor = child.fileno()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([*options.folders, str(ROOT)]))
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.out",
             sys.executable, "-m", "bench.webhook.baseline_server", str(descriptor)],
            pass_fds=(descriptor,), env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
            stderr=(work / "server.log").open("w"),
        )  # fmt: skip
        child.close()
        try:
            parent.send(options)
            if not parent.poll(START_SECONDS):
                raise RuntimeError(f"{ref}'s server did not start: see {work}/server.log")
            ready = parent.recv()
            if not isinstance(ready, dict):
                raise RuntimeError(f"{ref}'s server failed: {getattr(ready, 'text', ready)}")
            info = work / "info.json"
            info.write_text(json.dumps({
                "port": ready["port"], "ca": ca.cert_pem.decode(),
                "bodies": [request.body.decode() for request in prepared],
            }))  # fmt: skip
            from graceful_drain.controller.serving.webhook import WEBHOOK_PATH

            return {WEBHOOK: _counted(ref, WEBHOOK, server.pid, info, WEBHOOK_PATH, work)}
        finally:
            server.terminate()
            server.wait()
            parent.close()


def _counted(label: str, name: str, pid: int, info: Path, route: str, work: Path) -> float:
    """Warm `route` up, zero the server's counters, send COUNT requests, dump: k per request."""
    client = subprocess.Popen(
        [sys.executable, "-m", "bench.webhook.instructions", "load", str(info), route],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ROOT / "src"), str(ROOT / "packages/kubesim/src"), str(ROOT)])),
    )  # fmt: skip
    assert client.stdin is not None and client.stdout is not None
    with client:
        if client.stdout.readline().split() != ["warm", "0"]:
            raise RuntimeError(f"{label} {name}: the warm-up failed")
        subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
        client.stdin.write("\n")
        client.stdin.flush()
        done = client.stdout.readline().split()
        subprocess.run(["callgrind_control", "-d", name, str(pid)], check=True,
                       capture_output=True)  # fmt: skip
        client.stdin.write("\n")
        client.stdin.flush()
    if done != ["done", "0"]:
        raise RuntimeError(f"{label} {name}: failed requests ({done})")
    dump = max(work.glob("callgrind.out*"), key=lambda file: file.stat().st_mtime)
    return _total(dump) / (COUNT // CONCURRENCY * CONCURRENCY) / 1000


def main(refs: list[str]) -> int:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (apt-get install valgrind): nothing counted")
        return 1
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as temporary:
        scratch = Path(temporary)
        for name, figure in count("this", [ROOT / "src"], WEBHOOK, scratch).items():
            rows.append(("this checkout", name, figure))
        for ref in refs:
            for name, figure in count_baseline(ref, scratch).items():
                rows.append((ref, name, figure))
        for name, figure in count("reference", [ROOT / "src"], REFERENCE, scratch).items():
            rows.append(("aiohttp", name, figure))
    reference = next(figure for _, name, figure in rows if name == REFERENCE)
    print("| code | path | k instructions per request | ÷ reference |\n|---|---|---|---|")
    for code, name, figure in rows:
        print(f"| {code} | {name} | {figure:.1f} | {figure / reference:.2f} |")
    return 0


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["serve"]:
        import uvloop

        from graceful_drain.logs import configure_logging

        with contextlib.suppress(KeyboardInterrupt):
            configure_logging("json", "info", stream=open(os.devnull, "w"))  # noqa: SIM115
            uvloop.run(_serve(Path(arguments[1]), arguments[2]))
    elif arguments[:1] == ["load"]:
        import uvloop

        uvloop.run(_load(arguments[1], arguments[2], WARM, COUNT))
    else:
        sys.exit(main(arguments))
