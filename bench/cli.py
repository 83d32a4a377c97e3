"""`python -m bench`: run the benchmarks, print their tables, write bench/results/latest.*.

    PYTHONPATH=src python -m bench                  # everything, markdown on stdout
    PYTHONPATH=src python -m bench --json           # the same as JSON on stdout
    PYTHONPATH=src python -m bench --only webhook,memory
    PYTHONPATH=src python -m bench --smoke             # tiny sizes, seconds; writes nothing
    PYTHONPATH=src python -m bench --only memory,drain --baseline main~3   # old beside new
    PYTHONPATH=src python -m bench --only drain --karpenter-only   # real Karpenter's table
    PYTHONPATH=src python -m bench --only drain --karpenter-only --keep-logs /tmp/run1  # + logs
    PYTHONPATH=src python -m bench --only webhook --baseline dc8ad00 --webhook-rounds 12

Parts: webhook (1), memory (2: sync + decode), drain (3), detector (4). Each part's run is
bounded in time and request count; the whole full profile takes about 10 minutes on 2 cores
(4 of them for part 3's real control plane, and about 3 more for its real-Karpenter table).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import baseline, decode, machine
from bench.detector import run as detector
from bench.drain import run as drain
from bench.drain.timings import DrainTimings
from bench.memory import run as memory
from bench.report import Row, Table, json_document, markdown
from bench.webhook import run as webhook
from bench.webhook.population import PopulationSpec

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("webhook", "memory", "drain", "detector")


@dataclass(frozen=True)
class Profile:
    webhook: webhook.WebhookProfile = field(default_factory=webhook.WebhookProfile)
    memory: memory.MemoryProfile = field(default_factory=memory.MemoryProfile)
    decode: decode.DecodeProfile = field(default_factory=decode.DecodeProfile)
    detector: detector.DetectorProfile = field(default_factory=detector.DetectorProfile)
    drain: drain.DrainProfile = field(default_factory=drain.DrainProfile)


FULL = Profile()
SMOKE = Profile(
    webhook=webhook.WebhookProfile(
        population=PopulationSpec(deployments=40, pods=200, namespaces=4, samples_per_reason=2),
        concurrencies=(1, 4),
        rounds=2,
        warmup=0.1,
        duration=0.5,
        max_requests=500,
    ),
    memory=memory.MemoryProfile(sizes=(20, 60), namespaces=2),
    decode=decode.DecodeProfile(pods=50, repeats=1),
    detector=detector.DetectorProfile(
        healthy_runs=3,
        hanging_runs=2,
        hanging_deadline=0.3,
        cli_healthy_runs=1,
        cli_hanging_runs=1,
        cli_deadline=1.5,
        startup_rounds=2,
    ),
    drain=drain.DrainProfile(
        clients=("kubectl",),
        counts=(1,),
        timings=DrainTimings(0.02),
        # The real control plane at N = 1 (~20 s); skipped unless its binaries are built.
        # No real Karpenter: its start and one disruption would double the smoke's time.
        real=drain.RealProfile(clients=("kubectl",), counts=(1,), build=False, karpenter_counts=()),
    ),
)


def _parts(text: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = set(chosen) - set(PARTS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown part(s) {sorted(unknown)}; choose from {PARTS}")
    return chosen


def _rounds(text: str) -> int:
    try:
        rounds = int(text)
    except ValueError:
        rounds = 0
    if rounds < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: not a whole number of rounds, 1 or more")
    return rounds


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--only", type=_parts, default=PARTS, help=f"comma-separated: {PARTS}")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks it runs")
    parser.add_argument(
        "--out",
        type=Path,
        help="where latest.md and latest.json go (default: bench/results; --smoke: nowhere)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also run the parts against commit REF's src/ and packages/kubesim/src, first, "
        "in the same run, and compare (bench/baseline.py)",
    )
    parser.add_argument(
        "--webhook-rounds",
        type=_rounds,
        metavar="N",
        help="the webhook part's rounds per server and concurrency (default "
        f"{FULL.webhook.rounds}): each figure is the median of its rounds, so more of them "
        "resolve a smaller difference between two servers on a busy machine",
    )
    parser.add_argument(
        "--kubesim-only",
        action="store_true",
        help="leave out the drain part's real control plane (its series take ~4 minutes)",
    )
    parser.add_argument(
        "--keep-logs",
        type=Path,
        metavar="DIR",
        help="keep the real control plane's logs in DIR: each graceful-drain controller's at "
        "info (a line per admission), kube-apiserver's and the other components', the audit log",
    )
    parser.add_argument(
        "--karpenter-only",
        action="store_true",
        help="of the drain part, only the real-Karpenter table (real control plane and "
        "Karpenter; ~5 minutes)",
    )
    return parser


def _chosen_profile(args: argparse.Namespace) -> Profile:
    profile = SMOKE if args.smoke else FULL
    if args.webhook_rounds is not None:
        if "webhook" not in args.only:
            raise SystemExit("python -m bench: --webhook-rounds is for the webhook part; "
                             "add it to --only")  # fmt: skip
        rounds = dataclasses.replace(profile.webhook, rounds=args.webhook_rounds)
        profile = dataclasses.replace(profile, webhook=rounds)
    if args.karpenter_only:
        if args.kubesim_only:
            raise SystemExit("python -m bench: --karpenter-only runs on the real control "
                             "plane; it cannot go with --kubesim-only")  # fmt: skip
        profile = dataclasses.replace(profile, drain=profile.drain.only_karpenter())
    if args.keep_logs is not None:
        args.keep_logs.mkdir(parents=True, exist_ok=True)
        real = dataclasses.replace(profile.drain.real, keep_logs=str(args.keep_logs.resolve()))
        profile = dataclasses.replace(profile, drain=dataclasses.replace(profile.drain, real=real))
    if not args.kubesim_only:
        return profile
    drain_only_kubesim = profile.drain.without_real("left out (--kubesim-only)")
    return dataclasses.replace(profile, drain=drain_only_kubesim)


def _baseline_requests(profile: Profile, parts: Sequence[str]) -> list[tuple[str, object]]:
    """The compared parts' profiles for the baseline's run (never the real control plane:
    the comparison is of kubesim and the product, and the real series take minutes)."""
    chosen: dict[str, object] = {
        "memory": profile.memory,
        "drain": profile.drain.without_real("not run for a baseline"),
    }
    return [(part, chosen[part]) for part in parts]


def runners(profile: Profile) -> dict[str, Callable[[], list[Table]]]:
    return {
        "webhook": lambda: webhook.run(profile.webhook),
        "memory": lambda: [memory.run(profile.memory), decode.run(profile.decode)],
        "drain": lambda: drain.run(profile.drain),
        "detector": lambda: detector.run(profile.detector),
    }


def run(parts: Sequence[str], profile: Profile, progress: Callable[[str], None]) -> list[Table]:
    tables: list[Table] = []
    available = runners(profile)
    for part in parts:
        started = time.perf_counter()
        progress(f"bench: {part}...")
        produced = available[part]()
        progress(f"bench: {part} done in {time.perf_counter() - started:.0f} s")
        tables.extend(produced)
    return tables


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    profile = _chosen_profile(args)
    header = machine.describe()
    started = time.perf_counter()

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    baseline_rows: dict[str, list[Row]] | None = None
    compared = baseline.compared_parts(args.only)
    beside = "webhook" in args.only  # its baseline is a third server in its own rounds
    if args.baseline is not None and not compared and not beside:
        comparable = [*baseline.compared_parts(PARTS), "webhook"]
        print(f"python -m bench: --baseline compares only {comparable}", file=sys.stderr)
        return 2
    if args.baseline is not None:
        try:
            commit = baseline.resolve(args.baseline)
            if compared:
                progress(f"bench: the baseline {commit[:12]} first ({', '.join(compared)})...")
                document = baseline.run_parts(commit, _baseline_requests(profile, compared))
                baseline_rows = baseline.rows_by_table(document)
        except baseline.BaselineError as error:
            print(f"python -m bench: {error}", file=sys.stderr)
            return 2
        header["baseline"] = f"{commit} ({args.baseline})" + (", run first" if compared else "")
        if beside:
            webhook_profile = dataclasses.replace(profile.webhook, baseline=commit)
            profile = dataclasses.replace(profile, webhook=webhook_profile)
            header["baseline"] += "; the webhook's measured in the same rounds"
    tables = run(args.only, profile, progress)
    if baseline_rows is not None:
        this = {table.key: table.rows for table in tables}
        tables.append(baseline.compare(commit, this, baseline_rows))
    header["load average at end (1/5/15 min)"] = machine.load_average()
    header["total time"] = f"{time.perf_counter() - started:.0f} s"
    if args.smoke:
        header["profile"] = "smoke (tiny sizes: not figures to quote)"
    text = markdown(tables, header)
    document = json_document(tables, header)
    out: Path | None = args.out or (None if args.smoke else RESULTS)
    if out is not None and not args.no_write:
        out.mkdir(parents=True, exist_ok=True)
        (out / "latest.md").write_text(text, encoding="utf-8")
        (out / "latest.json").write_text(json.dumps(document, indent=2) + "\n", "utf-8")
    print(json.dumps(document, indent=2) if args.json else text)
    return 0
