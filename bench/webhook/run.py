"""Part 1: webhook throughput and latency against a trivial reference, measured in one run.

Two server processes (the webhook with its filled cache, and the reference), one fresh load
generator process per measurement. At each concurrency the two are measured back to back in
`rounds` rounds, the order alternating, so both see the same machine within seconds of each
other; this machine's speed drifts by a third from one window to the next, both servers' and
the client's alike. Each figure in the table is the median of its rounds, and a ratio to the
reference is the median of the per-round ratios (each round's pair of windows).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from bench import baseline
from bench.procs import Child, Subprocess
from bench.report import Column, Table, fixed, percent
from bench.stats import Bound, Summary, Target, evaluate, rate, ratio, summarize
from bench.webhook import baseline_server, breakdown, population
from bench.webhook.loadgen import LoadOptions, LoadRequest, LoadResult, latencies_of, loadgen_main
from bench.webhook.population import PopulationSpec, PreparedRequest
from bench.webhook.servers import Ready, ServerOptions, raw_nodes, server_main
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH
from kubesim.pki import CertificateAuthority

THROUGHPUT_TARGET = Target("webhook req/s ÷ reference req/s", Bound.AT_LEAST, 1.0)
CPU_TARGET = Target("webhook CPU per request ÷ reference's", Bound.AT_MOST, 0.85)
P99_TARGET = Target("webhook p99", Bound.BELOW, 5.0, " ms")
# The stages timed under load, the stack around them and the timing's own cost account for the
# webhook's CPU.
BREAKDOWN_TARGET = Target("|(stages + stack + timing) ÷ webhook CPU per request - 1|",
                          Bound.AT_MOST, 0.2)  # fmt: skip
TARGET_CONCURRENCY = 32
CLIENT_SATURATED = 0.9  # of one core: above this the client may be what limits the rate
START_TIMEOUT = 300.0  # filling 50,000 pods on a busy machine
# The breakdown's windows: the stack (CANNED_PATH) and the timed stages (TIMED_PATH) alternate,
# each this many times for duration * rounds / COST_ROUNDS, so both see the same machine.
COST_ROUNDS = 2
SERVERS = ("reference", "webhook")
BASELINE = "baseline"  # the --baseline commit's webhook server, a third in each round
BASELINE_TARGET = Target("webhook CPU per request ÷ the baseline's", Bound.BELOW, 1.0)


@dataclass(frozen=True)
class WebhookProfile:
    population: PopulationSpec = field(default_factory=PopulationSpec)
    concurrencies: tuple[int, ...] = (1, 32, 256)
    rounds: int = 4  # windows per server and concurrency, the two servers back to back
    warmup: float = 1.0
    duration: float = 2.5  # of each window
    max_requests: int = 400_000
    uvloop: bool = True
    # --baseline: a commit whose webhook server is measured in the same rounds (baseline_server.py)
    baseline: str | None = None


@dataclass(frozen=True)
class Measurement:
    server: str
    concurrency: int
    result: LoadResult
    server_cpu: float  # CPU seconds of the server process over the window
    stages: dict[str, float] = field(default_factory=dict)  # µs/request, on TIMED_PATH only
    round: int = 0

    @property
    def rps(self) -> float:
        return rate(self.result.completed, self.result.window)

    @property
    def cpu_per_request(self) -> float | None:
        """Server CPU µs per request answered."""
        return self.server_cpu / self.result.completed * 1e6 if self.result.completed else None

    @cached_property
    def latency(self) -> Summary | None:
        """The latencies of the requests answered without error (sorted once)."""
        return summarize(latencies_of(self.result))

    @property
    def p99_ms(self) -> float | None:
        return None if self.latency is None else self.latency.p99 * 1000


COLUMNS = [
    Column("server", "server"),
    Column("concurrency", "concurrency"),
    Column("requests", "requests", fixed(0)),
    Column("rps", "req/s", fixed(0)),
    Column("p50", "p50 ms", fixed(2)),
    Column("p99", "p99 ms", fixed(2)),
    Column("p999", "p99.9 ms", fixed(2)),
    Column("errors", "errors", fixed(0)),
    Column("server_cpu", "server CPU", percent),
    Column("cpu_us", "server CPU µs/req", fixed(0)),
    Column("client_cpu", "client CPU", percent),
    Column("client_us", "client µs/req", fixed(0)),
    Column("ratio", "vs reference", percent),
]


def _measure(
    server: Child,
    port: int,
    name: str,
    concurrency: int,
    ca_pem: bytes,
    requests: tuple[LoadRequest, ...],
    profile: WebhookProfile,
    path: str = WEBHOOK_PATH,
    round_: int = 0,
) -> Measurement:
    timed = path == breakdown.TIMED_PATH
    verify = name != "reference" and path != breakdown.CANNED_PATH  # canned: a fixed uid
    options = LoadOptions(
        host="127.0.0.1",
        port=port,
        ca_pem=ca_pem,
        path=path,
        requests=requests,
        concurrency=concurrency,
        warmup=profile.warmup,
        duration=profile.duration,
        max_requests=profile.max_requests,
        verify=verify,
        uvloop=profile.uvloop,
    )
    client = Child(f"loadgen-{name}-{concurrency}", loadgen_main, options)
    bound = profile.warmup + profile.duration + 60.0
    try:
        cpu_before: float | None = None
        while True:
            message = client.receive(bound)
            if message == "window":
                if timed:
                    server.ask("stages-reset", 10.0)
                cpu_before = server.ask("cpu", 10.0)
                continue
            assert isinstance(message, LoadResult)
            cpu_after = server.ask("cpu", 10.0)
            stages = server.ask("stages", 10.0) if timed else {}
            used = 0.0 if cpu_before is None else cpu_after - cpu_before
            return Measurement(name, concurrency, message, used, stages, round_)
    finally:
        client.finish()


def _load_requests(prepared: list[PreparedRequest]) -> tuple[LoadRequest, ...]:
    return tuple(LoadRequest(p.body, p.case.uid, p.case.allowed) for p in prepared)


def run(profile: WebhookProfile) -> list[Table]:
    spec = profile.population
    layout = population.plan(spec)
    prepared = population.prepared_requests(spec, layout)
    ca = CertificateAuthority("bench-ca")
    pair = ca.issue_server(["127.0.0.1", "localhost"], common_name="bench-webhook")
    servers: dict[str, tuple[Child, Ready]] = {}
    measurements: list[Measurement] = []
    kinds = SERVERS if profile.baseline is None else (*SERVERS, BASELINE)
    with contextlib.ExitStack() as stack:
        if profile.baseline is not None:
            folders = stack.enter_context(baseline.exported(profile.baseline))
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
            servers[BASELINE] = start_baseline(profile, folders, scratch, pair.cert_pem,
                                               pair.key_pem)  # fmt: skip
        measurements, canned, timed = _rounds(profile, kinds, servers, pair.cert_pem,
                                              pair.key_pem, ca.cert_pem, prepared)  # fmt: skip
    ready = servers["webhook"][1]
    timed_total = combined(timed)
    tables = [
        build_table(measurements, ready, prepared, profile, timed_total.stages),
        cost_table(measurements, timed_total, combined(canned)),
    ]
    if profile.baseline is not None:
        tables[0].notes.append(baseline_note(profile.baseline, servers[BASELINE][1]))
    return tables


def start_baseline(profile: WebhookProfile, folders: list[Path], scratch: Path, cert_pem: bytes,
                   key_pem: bytes) -> tuple[Child, Ready]:  # fmt: skip
    """The baseline commit's webhook server, its cache filled from the same objects."""
    spec = profile.population
    layout = population.plan(spec)
    now = datetime.now(UTC)
    sources = {
        "Pod": population.raw_pods(layout, spec),
        "ReplicaSet": population.raw_replicasets(layout),
        "Deployment": population.raw_deployments(layout, now),
        "Node": iter(raw_nodes(population.raw_pods(layout, spec))),
    }
    files = {}
    for kind, items in sources.items():
        files[kind] = str(scratch / f"{kind}.pickle")
        baseline_server.write_pages(items, Path(files[kind]))
    options = baseline_server.BaselineOptions(
        tuple(str(folder) for folder in folders), cert_pem, key_pem, files,
        population.ROLLOUT_TIMEOUT, population.ENABLED_ANNOTATION, profile.uvloop,
    )  # fmt: skip
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([*options.folders, str(baseline.ROOT)])
    child = Subprocess("server-baseline", "bench.webhook.baseline_server", options, environment)
    try:
        fields = child.receive(START_TIMEOUT)
    except BaseException:
        child.finish(1.0)
        raise
    return child, Ready(fields["port"], fields["rss_before"], fields["rss_after"],
                        fields["fill_seconds"], fields["objects"], [])  # fmt: skip


def baseline_note(commit: str, ready: Ready) -> str:
    return (
        f"baseline: commit {commit[:12]}'s webhook server (its `src/`, exported with git "
        "archive; bench/webhook/baseline_server.py), measured as a third server in every "
        "round, its answers checked as the webhook's; its cache filled from the same "
        f"objects in {ready.fill_seconds:.1f} s, RSS {ready.rss_after / 2**20:.0f} MiB. "
        "Its ratio to the reference, and the webhook's CPU per request to its own, are the "
        "medians of the per-round ratios."
    )


def _rounds(
    profile: WebhookProfile, kinds: tuple[str, ...], servers: dict[str, tuple[Child, Ready]],
    cert_pem: bytes, key_pem: bytes, ca_pem: bytes, prepared: list[PreparedRequest],
) -> tuple[list[Measurement], list[Measurement], list[Measurement]]:  # fmt: skip
    spec = profile.population
    measurements: list[Measurement] = []
    try:
        for kind in SERVERS:
            options = ServerOptions(kind, cert_pem, key_pem, spec, tuple(prepared), profile.uvloop)
            child = Child(f"server-{kind}", server_main, options)
            servers[kind] = (child, child.receive(START_TIMEOUT))
        requests = _load_requests(prepared)
        for concurrency in profile.concurrencies:
            for round_ in range(profile.rounds):
                for kind in kinds if round_ % 2 == 0 else kinds[::-1]:
                    child, ready = servers[kind]
                    measurements.append(_measure(child, ready.port, kind, concurrency,
                                                 ca_pem, requests, profile,
                                                 round_=round_))  # fmt: skip
        child, ready = servers["webhook"]
        at = _cost_concurrency(measurements)
        short = replace(profile, duration=profile.duration * profile.rounds / COST_ROUNDS)
        canned: list[Measurement] = []
        timed: list[Measurement] = []
        for _ in range(COST_ROUNDS):
            for path, into in ((breakdown.CANNED_PATH, canned), (breakdown.TIMED_PATH, timed)):
                into.append(_measure(child, ready.port, "webhook", at, ca_pem, requests,
                                     short, path))  # fmt: skip
    finally:
        for child, _ in servers.values():
            with contextlib.suppress(Exception):  # already gone: finish() reaps or kills it
                child.ask("stop", 30.0)
            child.finish()
    return measurements, canned, timed


def combined(windows: list[Measurement]) -> Measurement:
    """Several windows of one server and concurrency as one: requests, seconds and CPU summed,
    stages weighted by the requests of each window."""
    first = windows[0]
    completed = sum(m.result.completed for m in windows)
    result = LoadResult(
        completed=completed,
        window=sum(m.result.window for m in windows),
        client_cpu=sum(m.result.client_cpu for m in windows),
    )
    stages: dict[str, float] = {}
    for key in {key for m in windows for key in m.stages}:
        weighted = [(m.stages[key], m.result.completed) for m in windows if key in m.stages]
        weight = sum(count for _, count in weighted)
        stages[key] = sum(v * count for v, count in weighted) / weight if weight else 0.0
    cpu = sum(m.server_cpu for m in windows)
    return Measurement(first.server, first.concurrency, result, cpu, stages)


def _cost_concurrency(measurements: list[Measurement]) -> int:
    """Where the stages are timed: at the target's concurrency, else the highest measured."""
    if any(m.concurrency == TARGET_CONCURRENCY for m in measurements) or not measurements:
        return TARGET_CONCURRENCY
    return max(m.concurrency for m in measurements)


def build_table(measurements: list[Measurement], ready: Ready, prepared: list[PreparedRequest],
                profile: WebhookProfile, stages: dict[str, float]) -> Table:  # fmt: skip
    spec = profile.population
    table = Table(
        "webhook",
        "Webhook throughput and latency (AdmissionReview over TLS, keep-alive)",
        COLUMNS,
    )
    series = _series(measurements)
    saturated: list[str] = []
    for (server, concurrency), rounds in series.items():
        reference = series.get(("reference", concurrency), [])
        tails = [m.latency for m in rounds]
        client_shares = [m.result.client_cpu / m.result.window for m in rounds
                         if m.result.window > 0]  # fmt: skip
        if any(used >= CLIENT_SATURATED for used in client_shares):
            saturated.append(f"{server} at concurrency {concurrency}")
        share = _paired(rounds, reference, lambda m: m.rps) if server != "reference" else None
        server_shares = [m.server_cpu / m.result.window for m in rounds if m.result.window > 0]
        client_micros = [m.result.client_cpu / m.result.completed * 1e6 for m in rounds
                         if m.result.completed]  # fmt: skip
        p99 = _median(m.p99_ms for m in rounds)
        table.add(
            server=server,
            concurrency=concurrency,
            requests=sum(m.result.completed for m in rounds),
            rps=_median(m.rps for m in rounds),
            p50=_median(None if t is None else t.p50 * 1000 for t in tails),
            p99=p99,
            p999=_median(None if t is None else t.p999 * 1000 for t in tails),
            errors=sum(sum(m.result.errors.values()) for m in rounds),
            server_cpu=_median(server_shares),
            cpu_us=_median(m.cpu_per_request for m in rounds),
            client_cpu=_median(client_shares),
            client_us=_median(client_micros),
            ratio=share,
        )
        if server == "webhook" and concurrency == TARGET_CONCURRENCY:
            where = f"concurrency {TARGET_CONCURRENCY}"
            table.verdicts.append(evaluate(THROUGHPUT_TARGET, share, where))
            cpu_ratio = _paired(rounds, reference, lambda m: m.cpu_per_request)
            table.verdicts.append(evaluate(CPU_TARGET, cpu_ratio, where))
            table.verdicts.append(evaluate(P99_TARGET, p99, where))
            theirs = series.get((BASELINE, concurrency))
            if theirs:
                against = _paired(rounds, theirs, lambda m: m.cpu_per_request)
                table.verdicts.append(evaluate(BASELINE_TARGET, against, where))
        errors: Counter[str] = Counter()
        for m in rounds:
            errors.update(m.result.errors)
        for kind, count in sorted(errors.items()):
            table.notes.append(f"{server} at concurrency {concurrency}: {count} x {kind}")
    reasons = list(dict.fromkeys(p.case.reason.value for p in prepared))
    table.notes += [
        f"Cache: {ready.objects.get('deployments', 0):,} Deployments, "
        f"{ready.objects.get('replicasets', 0):,} ReplicaSets, {ready.objects.get('pods', 0):,} "
        f"pods in {spec.namespaces} namespaces, filled through the informers' list path "
        "(transform, store, indexes) from objects generated in memory, not from kubesim: "
        f"{ready.fill_seconds:.1f} s; webhook process RSS "
        f"{ready.rss_after / 2**20:.0f} MiB (was {ready.rss_before / 2**20:.0f} MiB before).",
        f"Mix: {len(prepared)} distinct requests cycled in order, evenly across reasons "
        f"{', '.join(reasons)}; every answer's uid and allowed value are checked. "
        "pod-gone and cache-cold need a live GET (pod not cached), whose cost is the API "
        "server's, and are left out; rollout-requested's PATCH is answered in-process at once; "
        "not-enabled is reached by configuring the enabled annotation.",
        "Webhook as in production: one JSON log line per admission (to /dev/null), Prometheus "
        "metrics, the controller's TLS source. Both servers and the client run uvloop"
        + ("" if profile.uvloop else " (off in this run)")
        + ", each in its own process; the client is a minimal HTTP/1.1 client (prebuilt "
        "requests, one in flight per connection) whose own CPU use is shown.",
        f"Rounds: at each concurrency, {profile.rounds} rounds of one window per server, back "
        "to back, the order alternating; a window is a fresh client, "
        f"{profile.warmup:g} s of warm-up, then {profile.duration:g} s or "
        f"{profile.max_requests:,} requests. Each figure is the median of its rounds; requests "
        "and errors are totals; a ratio to the reference is the median of the per-round "
        "ratios. Latency = request written to response read, nearest-rank percentiles.",
    ]
    spread = p99_spread(series)
    if spread:
        table.notes.append(spread)
    if ready.mismatches:
        table.notes.append(
            f"{len(ready.mismatches)} requests were decided on an unexpected reason, e.g. "
            + "; ".join(ready.mismatches[:3])
        )
    if saturated:
        table.notes.append(
            "The client used ≥ 90% of a core on " + ", ".join(saturated) + ": there the "
            "client may be what limits the rate, so a reference figure is a lower bound and "
            "the ratio flatters the webhook."
        )
    missed = [v for v in table.verdicts if not v.met]
    if missed:
        table.notes.append(miss_explanation(measurements, stages))
    return table


def _series(measurements: list[Measurement]) -> dict[tuple[str, int], list[Measurement]]:
    """The rounds of each (server, concurrency), in the order first measured."""
    grouped: dict[tuple[str, int], list[Measurement]] = {}
    for m in measurements:
        grouped.setdefault((m.server, m.concurrency), []).append(m)
    return grouped


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _paired(rounds: Sequence[Measurement], reference: Sequence[Measurement],
            value: Callable[[Measurement], float | None]) -> float | None:  # fmt: skip
    """The median over rounds of value(this) ÷ value(the reference's window of that round)."""
    theirs = {m.round: value(m) for m in reference}
    ratios = []
    for m in rounds:
        mine, other = value(m), theirs.get(m.round)
        if mine is not None and other is not None:
            ratios.append(ratio(mine, other))
    return _median(ratios)


def _p99s(rounds: Sequence[Measurement]) -> list[float]:
    return [p99 for m in rounds if (p99 := m.p99_ms) is not None]


def p99_spread(series: dict[tuple[str, int], list[Measurement]]) -> str | None:
    """How far p99 moved between the rounds at the target's concurrency, for both servers."""
    web = series.get(("webhook", TARGET_CONCURRENCY), [])
    ref = series.get(("reference", TARGET_CONCURRENCY), [])
    web_p99, ref_p99 = _p99s(web), _p99s(ref)
    if len(web_p99) < 2 or not ref_p99:
        return None
    paired = _paired(web, ref, lambda m: m.p99_ms)
    return (
        f"p99 per round at concurrency {TARGET_CONCURRENCY}: the reference "
        f"{min(ref_p99):.1f} to {max(ref_p99):.1f} ms, the webhook "
        f"{min(web_p99):.1f} to {max(web_p99):.1f} ms"
        + ("" if paired is None else f"; the webhook's ÷ the reference's, median {paired:.2f}")
        + "."
    )


def miss_explanation(measurements: list[Measurement], stages: dict[str, float]) -> str:
    """Why a target was missed, from what the run itself shows (medians of the rounds)."""
    series = _series(measurements)
    web = series.get(("webhook", TARGET_CONCURRENCY), [])
    ref = series.get(("reference", TARGET_CONCURRENCY), [])
    parts = ["Targets missed."]
    web_cpu = _median(m.cpu_per_request for m in web)
    ref_cpu = _median(m.cpu_per_request for m in ref)
    if web_cpu is not None and ref_cpu:
        parts.append(
            f"Under load the webhook process spent {web_cpu:.0f} µs of CPU per request, the "
            f"reference {ref_cpu:.0f} µs (HTTP + TLS + aiohttp): on one core the rate ratio "
            "is about the inverse of that."
        )
        if "total" in stages:
            parts.append(
                f"The webhook's own work (parse "
                f"{stages['parse']:.0f}, decide {stages['decide']:.0f}, encode "
                f"{stages['encode']:.0f}, log + metrics {stages['observe']:.0f} µs, timed under "
                f"load) costs {stages['total'] / ref_cpu:.1f}x the whole reference request."
            )
    rps = _median(m.rps for m in web)
    if rps:
        parts.append(
            f"With {TARGET_CONCURRENCY} requests always in flight, latency follows the rate "
            f"(Little's law): {rps:,.0f} req/s means {TARGET_CONCURRENCY / rps * 1000:.1f} "
            f"ms on average, so a p99 under {P99_TARGET.limit:g} ms needs well over "
            f"{TARGET_CONCURRENCY / (P99_TARGET.limit / 1000):,.0f} req/s."
        )
    ref_p99 = _median(_p99s(ref))
    ref_p50 = _median(None if (t := m.latency) is None else t.p50 * 1000 for m in ref)
    paired = _paired(web, ref, lambda m: m.p99_ms)
    if ref_p99 is not None and ref_p50 is not None and paired is not None:
        parts.append(
            f"The reference's own p99 in the same rounds was {ref_p99:.1f} ms "
            f"(p50 {ref_p50:.1f} ms): round by round, the webhook's p99 is {paired:.2f}x it."
        )
    return " ".join(parts)


STAGE_LABELS = {
    "parse": "parse the AdmissionReview (JSON + validation)",
    "decide": "cache lookups + decision table",
    "encode": "encode the AdmissionResponse",
    "observe": "log line (JSON) + Prometheus metrics",
}


def _server_micros(measurements: list[Measurement], server: str, concurrency: int) -> float | None:
    """Server CPU µs per request over every window of (server, concurrency), pooled."""
    matching = [m for m in measurements if (m.server, m.concurrency) == (server, concurrency)]
    completed = sum(m.result.completed for m in matching)
    return sum(m.server_cpu for m in matching) / completed * 1e6 if completed else None


def cost_table(measurements: list[Measurement], timed: Measurement, stack: Measurement) -> Table:
    """The webhook's CPU per request by stage, timed under load, plus the stack around them
    (the reference's canned answer served by the webhook's process, site and guard) and the
    timing's own cost, against what the webhook process used per request while timed."""
    table = Table(
        "webhook_cost",
        "Where the webhook's CPU time goes under load (µs per request)",
        [Column("stage", "stage"), Column("micros", "µs/request", fixed(0))],
    )
    stages, concurrency = timed.stages, timed.concurrency
    for stage, label in STAGE_LABELS.items():
        table.add(stage=label, micros=stages.get(stage))
    own = stages.get("total")
    table.add(stage="the webhook's own work (sum)", micros=own)
    canned = _server_micros([stack], "webhook", concurrency)
    table.add(stage=f"+ the stack: a canned answer from the webhook's process, server and "
                    f"guard, c={concurrency} (TLS + HTTP + guard + event loop)",
              micros=canned)  # fmt: skip
    timing = stages.get("timing")
    table.add(stage="+ the timing itself (clock reads, bookkeeping)", micros=timing)
    parts = (own, canned, timing)
    total = None if None in parts else sum(p for p in parts if p is not None)
    table.add(stage="= expected webhook CPU per request", micros=total)
    measured = _server_micros([timed], "webhook", concurrency)
    table.add(stage=f"webhook CPU per request in the timed windows, c={concurrency}",
              micros=measured)  # fmt: skip
    table.add(stage=f"webhook CPU per request, c={concurrency} (main window, untimed)",
              micros=_server_micros(measurements, "webhook", concurrency))  # fmt: skip
    reference = _server_micros(measurements, "reference", concurrency)
    table.add(stage=f"the reference server's whole request, c={concurrency} (aiohttp, own "
                    "process, no guard)", micros=reference)  # fmt: skip
    left_out = None if canned is None or reference is None else canned - reference
    table.add(stage="the webhook's server and guard against the reference's aiohttp "
                    "(stack - reference)", micros=left_out)  # fmt: skip
    gap = None if total is None or not measured else abs(total / measured - 1)
    table.verdicts.append(evaluate(BREAKDOWN_TARGET, gap, f"concurrency {concurrency}"))
    table.notes.append(
        f"Stages timed under load at concurrency {concurrency}, on a copy of the handler that "
        "reads the thread's CPU clock between its steps, and around the observation of each "
        "loop turn's answers (log lines and metrics, run in the turn after the answers as in "
        "production); the clock's own cost is measured and taken off each stage, and shown "
        "as its own row. They run interleaved with TLS, HTTP and the event loop. The stack "
        "around them is measured in the same process: the "
        "reference's canned answer on the webhook's own server and connection guard. Canned and "
        f"timed windows alternate ({COST_ROUNDS} each, about "
        f"{timed.result.window / COST_ROUNDS:.0f} s each), so both see the "
        "same machine; the expected sum is compared with the CPU seconds the webhook process "
        "used over the timed windows divided by the requests answered."
    )
    return table
