"""`python -m bench.detector.compare_startup REF`: the detector's start-up and verdict → exit
at REF (its src/ exported with `git archive`) beside this checkout's, in one run,
interleaved round by round, against the same kubesim.  Prints the table as markdown."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from bench.detector import startup
from bench.detector.kubesim_proc import Workload, kubesim_main
from bench.detector.run import CLI_MARGIN, REPO, _cli_env
from bench.machine import load_average
from bench.procs import Child
from bench.report import markdown_table


def _export(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", ref, "src"], cwd=REPO, capture_output=True,
                             check=True).stdout  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _at(source: Path, *args: str) -> list[str]:
    program = f"import sys; sys.path.insert(0, {str(source)!r}); " + startup.CLI
    return [sys.executable, "-c", program, *args]


def main(argv: list[str]) -> int:
    ref = argv[0] if argv else "main"
    rounds = int(argv[1]) if len(argv) > 1 else 20
    with tempfile.TemporaryDirectory() as folder:
        before = _export(ref, Path(folder))
        here = REPO / "src"
        sim = Child("kubesim-detector", kubesim_main, True)
        try:
            workload: Workload = sim.receive(60.0)
            classify = ("termination-cause", "--json", "--deadline", "2.0", "--kubeconfig")
            pod, laptop = workload.pod_kubeconfig, workload.kubeconfig
            commands: dict[str, list[str]] = {startup.BARE: [sys.executable, "-c", "pass"]}
            for label, source in ((ref, before), ("this checkout", here)):
                commands[f"{label}: graceful-drain --version"] = _at(source, "--version")
                commands[f"{label}: termination-cause --help"] = _at(
                    source, "termination-cause", "--help"
                )
                commands[f"{label}: {startup.CLASSIFICATION}"] = _at(source, *classify, pod)
                commands[f"{label}: {startup.CLASSIFICATION}{startup.YAML_KUBECONFIG}"] = _at(
                    source, *classify, laptop
                )
            startup.compile_sources(before, here)
            series = startup.measure(commands, _cli_env(workload), rounds, 2.0 + CLI_MARGIN)
            sim.ask("stop", 30.0)
        finally:
            sim.finish()
    table = startup.build_table(series, load_average())
    print(markdown_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
