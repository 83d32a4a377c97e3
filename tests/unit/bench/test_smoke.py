"""Every benchmark runs end to end at a tiny size and writes its tables (seconds, not figures).

Nothing here looks at timings: the benchmark itself reports targets as table text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench import cli

from realcluster.binaries import built_bin_dir


def run_parts(tmp_path: Path, parts: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert cli.main(["--smoke", "--only", parts, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert printed == (tmp_path / "latest.md").read_text(encoding="utf-8") + "\n"
    document: dict[str, Any] = json.loads((tmp_path / "latest.json").read_text("utf-8"))
    return document


def tables_by_key(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {table["key"]: table for table in document["tables"]}


def test_webhook_benchmark_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tables = tables_by_key(run_parts(tmp_path, "webhook", capsys))
    webhook = tables["webhook"]
    servers = [(row["server"], row["concurrency"]) for row in webhook["rows"]]
    assert servers == [("reference", 1), ("webhook", 1), ("reference", 4), ("webhook", 4)]
    assert all(row["requests"] > 0 for row in webhook["rows"])
    assert not any("unexpected reason" in note for note in webhook["notes"])
    assert not any("wrong decision" in n or "uid not echoed" in n for n in webhook["notes"])
    assert [t["where"] for t in webhook["targets"]] == []  # concurrency 32 is not in the smoke
    stages = [row["stage"] for row in tables["webhook_cost"]["rows"]]
    assert len(stages) == 12
    assert all(row["micros"] is not None for row in tables["webhook_cost"]["rows"])
    [breakdown] = tables["webhook_cost"]["targets"]
    assert breakdown["value"] is not None


def test_memory_benchmark_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tables = tables_by_key(run_parts(tmp_path, "memory", capsys))
    memory = tables["memory"]
    assert [row["pods"] for row in memory["rows"]] == [20, 60]
    assert all(row["cached"].endswith("/ 2 / 2") for row in memory["rows"])
    [target] = memory["targets"]
    assert target["value"] is not None
    assert len(tables["decode"]["rows"]) == 5


def test_unknown_parts_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--only", "webhook,nonsense"])
    assert "nonsense" in capsys.readouterr().err


def test_detector_benchmark_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table, startup = run_parts(tmp_path, "detector", capsys)["tables"]
    rows = [(row["how"], row["api"]) for row in table["rows"]]
    assert rows == [("library", "healthy"), ("CLI process", "healthy"),
                    ("library", "hanging"), ("CLI process", "hanging")]  # fmt: skip
    verdicts = [row["verdicts"] for row in table["rows"]]
    assert verdicts[0].startswith("voluntary / drain_gracefully")
    assert verdicts[2].startswith("indeterminate / shed_load_and_exit_fast")
    assert len(table["targets"]) == 4
    # start-up: bare python, --version, --help, a classification with a pod's credentials and
    # with a YAML kubeconfig; the gap only for the classifications
    assert [row["what"] for row in startup["rows"]] == [
        "python -c pass", "graceful-drain --version", "termination-cause --help",
        "termination-cause (real classification)",
        "termination-cause (real classification), YAML kubeconfig",
    ]  # fmt: skip
    assert startup["rows"][3]["gap_p50"] is not None
    assert startup["rows"][4]["gap_p50"] is not None
    assert startup["rows"][1]["gap_p50"] is None


def test_drain_benchmark_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tables = tables_by_key(run_parts(tmp_path, "drain", capsys))
    [row] = tables["drain"]["rows"]
    assert (row["client"], row["count"]) == ("kubectl", 1)
    assert row["drain"] is not None  # graceful-drain let the drain finish
    [alternatives] = tables["drain_alternatives"]["rows"]
    assert alternatives["none_down"] == "1/1"  # unprotected: the one Deployment went down
    assert alternatives["pdb"].startswith("blocked")
    assert alternatives["polling_drain"] is not None
    real = tables["drain_real"]
    planes = [(row["client"], row["count"], row["plane"]) for row in real["rows"]]
    if built_bin_dir() is None:
        assert planes == [("kubectl", 1, "kubesim")]
        assert real["notes"][0].startswith("Real control plane: not run")
    else:
        assert planes == [("kubectl", 1, "kubesim"), ("kubectl", 1, "real")], real["notes"]
        assert real["rows"][1]["drain"] is not None  # graceful-drain let the real drain finish
        assert real["rows"][1]["none_down"] == "1/1"
    assert real["notes"][-1].startswith(("At N=1", "Whose the lag at N=1"))
    # real Karpenter is left out of the smoke (its start and a disruption take a minute)
    karpenter = tables["drain_karpenter"]
    assert karpenter["rows"] == []
    assert karpenter["notes"][0].startswith("Real Karpenter: not run")


def test_webhook_benchmark_smoke_with_a_baseline_commit_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # HEAD's webhook server as the baseline: a third server in every round, on HEAD's
    # exported code, its answers checked like the webhook's
    argv = ["--smoke", "--only", "webhook", "--baseline", "HEAD", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    capsys.readouterr()
    document: dict[str, Any] = json.loads((tmp_path / "latest.json").read_text("utf-8"))
    webhook = tables_by_key(document)["webhook"]
    servers = [(row["server"], row["concurrency"]) for row in webhook["rows"]]
    assert servers == [(server, concurrency) for concurrency in (1, 4)
                       for server in ("reference", "webhook", "baseline")]  # fmt: skip
    baseline_rows = [row for row in webhook["rows"] if row["server"] == "baseline"]
    assert all(row["requests"] > 0 and row["errors"] == 0 for row in baseline_rows)
    assert all(row["ratio"] is not None for row in baseline_rows)  # against the reference
    assert any(note.startswith("baseline: commit") for note in webhook["notes"])
    assert "the webhook's measured in the same rounds" in document["machine"]["baseline"]


def test_the_webhook_rounds_are_chosen_on_the_command_line() -> None:
    args = cli.parser().parse_args(["--only", "webhook", "--webhook-rounds", "12"])
    assert cli._chosen_profile(args).webhook.rounds == 12
    args = cli.parser().parse_args(["--only", "webhook"])
    assert cli._chosen_profile(args).webhook.rounds == cli.FULL.webhook.rounds


@pytest.mark.parametrize("rounds", ["0", "-3", "two", "1.5"])
def test_a_number_of_rounds_that_is_none_is_refused(
    rounds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--only", "webhook", "--webhook-rounds", rounds, "--no-write"])
    assert exited.value.code == 2
    assert f"{rounds!r}: not a whole number of rounds" in capsys.readouterr().err


def test_webhook_rounds_without_the_webhook_part_are_refused() -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--only", "memory", "--webhook-rounds", "8", "--no-write"])
    assert "--webhook-rounds is for the webhook part" in str(exited.value.code)
