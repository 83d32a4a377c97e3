"""Another commit measured in the same run: `python -m bench --baseline REF`.

The commit's `src/` and `packages/kubesim/src` are exported with `git archive` into a
temporary folder, and the compared parts run once more, with the same profiles, in a child
(`bench/baseline_child.py`) whose PYTHONPATH puts those folders first. Spawned benchmark
processes inherit that path, so the product and kubesim are the commit's while the benchmark
code stays this checkout's (the commit must offer the kubesim and product APIs the compared
parts call). The child's tables come back as JSON; each `Comparison` then puts one figure of
both runs side by side as this ÷ baseline, with its target where the issue sets one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import Cell, Column, Row, Table, fixed
from bench.stats import Bound, Target, evaluate, ratio

ROOT = Path(__file__).resolve().parent.parent
CODE_FOLDERS = ("src", "packages/kubesim/src")
CHILD_TIMEOUT = 3600.0


class BaselineError(RuntimeError):
    """The baseline could not be exported or run; the message says why."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """One figure of one table, this checkout's against the baseline's.

    `key` names the columns that identify a row (e.g. client); the rows of the largest
    `largest` value either run has are compared (the profile's biggest size, whatever the
    profile), a figure one run lacks shown as missing.
    """

    table: str
    column: str
    what: str
    largest: str
    key: tuple[str, ...] = ()
    target: Target | None = None


COMPARISONS = (
    Comparison(
        "memory",
        "seconds",
        "time to a synced cache",
        largest="pods",
        target=Target("time to synced, this ÷ baseline", Bound.AT_MOST, 0.5),
    ),
    Comparison("drain", "drain", "drain with graceful-drain (s)", largest="count", key=("client",)),
    Comparison(
        "drain",
        "cpu",
        "kubesim CPU of that drain (s)",
        largest="count",
        key=("client",),
        target=Target("kubesim CPU per rollout, this ÷ baseline", Bound.AT_MOST, 0.5),
    ),
)


def compared_parts(
    parts: Sequence[str], comparisons: Sequence[Comparison] = COMPARISONS
) -> list[str]:
    """The parts the baseline must run: those a comparison reads (each compared table is the
    first table of the part of the same name)."""
    return [part for part in parts if any(c.table == part for c in comparisons)]


def resolve(ref: str, repo: Path = ROOT) -> str:
    """The full commit id `ref` names in `repo`; BaselineError when it names none."""
    found = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise BaselineError(f"--baseline {ref!r}: not a commit in {repo}")
    return found.stdout.strip()


@contextlib.contextmanager
def exported(commit: str, repo: Path = ROOT) -> Iterator[list[Path]]:
    """The commit's code folders (those of CODE_FOLDERS it has: before kubesim became its own
    distribution, `src/` held both), exported into a temporary folder removed afterwards."""
    present = [folder for folder in CODE_FOLDERS if _has_folder(repo, commit, folder)]
    if not present:
        raise BaselineError(f"{commit[:12]} has none of {', '.join(CODE_FOLDERS)}")
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as temporary:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", commit, *present],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            detail = archive.stderr.decode(errors="replace").strip()
            raise BaselineError(f"git archive {commit[:12]} failed: {detail}")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(temporary, filter="data")
        yield [Path(temporary, name) for name in present]


def _has_folder(repo: Path, commit: str, folder: str) -> bool:
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-d", "--name-only", commit, "--", folder],
        capture_output=True,
        text=True,
        check=False,
    )
    return listed.stdout.strip() == folder


def run_parts(commit: str, requests: Sequence[tuple[str, object]]) -> dict[str, Any]:
    """The commit's tables for the (part, profile) pairs, from `bench/baseline_child.py`."""
    with exported(commit) as folders:
        environment = dict(os.environ)
        path = [str(folder) for folder in folders] + [str(ROOT)]
        environment["PYTHONPATH"] = os.pathsep.join(path)
        try:
            child = subprocess.run(
                [sys.executable, "-m", "bench.baseline_child"], input=pickle.dumps(list(requests)),
                cwd=ROOT, env=environment, stdout=subprocess.PIPE, timeout=CHILD_TIMEOUT,
                check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise BaselineError(f"the baseline run took over {CHILD_TIMEOUT:.0f} s") from None
        if child.returncode != 0:
            raise BaselineError(f"the baseline run exited with {child.returncode} (see above)")
        document: dict[str, Any] = json.loads(child.stdout)
        code = document["machine"].get("code", "")
        if not all(
            any(where.startswith(str(folder)) for folder in folders) for where in code.split(", ")
        ):
            raise BaselineError(f"the baseline run imported this checkout's code ({code})")
    return document


def rows_by_table(document: Mapping[str, Any]) -> dict[str, list[Row]]:
    return {table["key"]: list(table["rows"]) for table in document["tables"]}


COLUMNS = [
    Column("what", "figure"),
    Column("where", "row"),
    Column("baseline", "baseline", fixed(2)),
    Column("this", "this checkout", fixed(2)),
    Column("ratio", "this ÷ baseline", fixed(2)),
]


def compare(
    commit: str,
    this: Mapping[str, list[Row]],
    baseline: Mapping[str, list[Row]],
    comparisons: Sequence[Comparison] = COMPARISONS,
) -> Table:
    """This checkout's figures beside the baseline's, with the targets evaluated."""
    table = Table("baseline", f"This checkout against {commit[:12]}, measured in the same run",
                  COLUMNS)  # fmt: skip
    for comparison in comparisons:
        ours = this.get(comparison.table, [])
        theirs = baseline.get(comparison.table, [])
        size = _largest_size([*ours, *theirs], comparison.largest)
        new_rows, old_rows = _at(ours, comparison, size), _at(theirs, comparison, size)
        for key in sorted(set(new_rows) | set(old_rows), key=str):
            where = ", ".join([*(str(value) for value in key), f"{comparison.largest} = {size:,}"])
            new = _number(new_rows.get(key), comparison.column)
            old = _number(old_rows.get(key), comparison.column)
            quotient = None if new is None or old is None else ratio(new, old)
            table.add(what=comparison.what, where=where, baseline=old, this=new, ratio=quotient)
            if comparison.target is not None:
                table.verdicts.append(evaluate(comparison.target, quotient, where))
    table.notes.append(
        f"The baseline is commit {commit[:12]}: its `src/` and `packages/kubesim/src` run "
        "under this checkout's benchmark code, in a child run just before this one, on the "
        "same machine. Only the ratio compares; each figure is one run's."
    )
    return table


def _largest_size(rows: Sequence[Row], column: str) -> float:
    sizes = [size for row in rows if isinstance(size := row.get(column), int | float)]
    return max(sizes, default=0)


def _at(rows: Sequence[Row], comparison: Comparison, size: float) -> dict[tuple[Cell, ...], Row]:
    """The rows of one size, by their key columns."""
    return {
        tuple(row.get(name) for name in comparison.key): row
        for row in rows
        if row.get(comparison.largest) == size
    }


def _number(row: Row | None, column: str) -> float | None:
    if row is None:
        return None
    value = row.get(column)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
