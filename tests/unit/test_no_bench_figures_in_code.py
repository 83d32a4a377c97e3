"""Benchmark figures live in bench/README.md and bench/results/, not in the code.

A docstring or comment says why code is shaped for speed; a measured figure ("~25x the
cost", "~4 µs instead of ~40 µs") goes stale there without anyone noticing. This walks the
docstrings and comments of the product (`src/graceful_drain`) and of kubesim and reports
any sentence that reads like a measurement. Durations that are behaviour (a 100 ms
back-off, `500ms` as a flag value) are not figures and pass.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TREES = (REPO / "src" / "graceful_drain", REPO / "packages" / "kubesim" / "src" / "kubesim")

NUMBER = r"\d+(?:[.,]\d+)*"
SMALL_WORDS = r"(?:two|three|four|five|six|seven|eight|nine|ten|twenty|a hundred)"
FIGURES = [
    # micro- and nanoseconds are what a benchmark measures, never a setting here
    re.compile(rf"{NUMBER}\s?(?:µs|μs|ns)\b"),
    re.compile(rf"\b{NUMBER}us\b"),
    # an approximate figure: ~25x, ~4 ms, ~40 %
    re.compile(rf"~\s?{NUMBER}\s?(?:x|\u00d7|%|ms|s)\b", re.IGNORECASE),
    # a ratio against something: 1.5x the writes, 8x cheaper, ten times faster
    re.compile(
        rf"\b(?:{NUMBER}\s?(?:x|\u00d7)|(?:{NUMBER}|{SMALL_WORDS})\s+times)\s+"
        r"(?:the|as|faster|slower|cheaper|quicker|less|more|fewer)\b",
        re.IGNORECASE,
    ),
    # a fraction of a cost: a tenth as much, about a third of it
    re.compile(
        r"\b(?:costs?|takes?|took|spends?|spent)\s+(?:about\s+|roughly\s+|only\s+)?"
        r"(?:a|one)\s+(?:half|third|quarter|fifth|tenth)\b"
        r"|\b(?:a|one)\s+(?:half|third|quarter|fifth|tenth)\s+as\s+(?:much|long|fast)\b",
        re.IGNORECASE,
    ),
    # a measured cost or rate: costs 22 ms, 17k req/s, p99 of 4.3 ms
    re.compile(
        rf"\b(?:costs?|took|spends?|spent)\s+(?:about\s+|~\s?)?{NUMBER}\s?(?:ms|s)\b",
        re.IGNORECASE,
    ),
    re.compile(rf"{NUMBER}\s?k?\s?(?:req/s|requests/s|ops/s)\b", re.IGNORECASE),
    re.compile(rf"\bp(?:50|90|95|99(?:\.9)?)\b\D{{0,12}}{NUMBER}\s?(?:ms|s)\b", re.IGNORECASE),
    re.compile(rf"\b{NUMBER}\s?%\s+(?:faster|slower|cheaper|of (?:the |its )?CPU)\b", re.I),
]


def figures_in(text: str) -> list[str]:
    return [match.group(0) for pattern in FIGURES for match in pattern.finditer(text)]


def prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring and comment of a module."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(
            node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        ) and (docstring := ast.get_docstring(node, clean=False)):
            yield (node.body[0].lineno, docstring)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield (token.start[0], token.string)


def findings(path: Path, root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{line}: {figure!r}"
        for line, text in prose(path.read_text())
        for figure in figures_in(" ".join(text.split()))  # a figure may span two lines
    ]


def test_no_docstring_or_comment_of_the_code_quotes_a_benchmark_figure() -> None:
    paths = [path for tree in TREES for path in sorted(tree.rglob("*.py"))]
    assert len(paths) > 100, "the walk found too few modules to prove anything"
    found = [finding for path in paths for finding in findings(path, REPO)]
    assert found == [], "move the figure to bench/README.md, keep the why:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "sentence",
    [
        # what the code said before the figures moved to bench/README.md
        "a frozen dataclass sets each of its 14 fields through object.__setattr__ (~25x the cost)",
        "a pod of ~3 KiB costs ~4 µs instead of ~40 µs decoded to dicts and transformed",
        "the webhook builds one per decision, ~8x cheaper than a frozen dataclass",
        "this protocol, on httptools' parser, costs about a third of it",
        "it costs a tenth as much, which matters for list pages of 500 pods",
        "copy.deepcopy for a JSON document, about eight times faster than deepcopy",
        "an N = 50 rollout made 1.5x the status writes, and conflicts",
        # and what a benchmark would print
        "a canned answer costs 22 µs of CPU",
        "about 17k req/s, p99 under 3 ms",
        "decode took 12us a pod",
        "the struct is 30 % faster",
        "made 1.5\u00d7 the status writes",
    ],
)
def test_a_figure_is_found(sentence: str) -> None:
    assert figures_in(sentence) != []


@pytest.mark.parametrize(
    "sentence",
    [
        "Karpenter backs off from 100ms",
        "retrying conflicts every 750 ms for up to 5 s",
        "5 ms doubling to 5 s",
        'Go\'s time.Duration.String(): "10s", "1m20s", "20ms", "1.5s"',
        "a pod of ~3 KiB",
        "a rollout of N Deployments is N times more events over N times more pods",
        "whole milliseconds (500ms)",
        "so a 'waited 515ms' message is exact",
        "a body over 128 KiB goes out gzip-compressed",
        "HTTP/1.x as Go's net/http answers it",
    ],
)
def test_a_duration_or_size_is_not_a_figure(sentence: str) -> None:
    assert figures_in(sentence) == []


def test_docstrings_and_comments_are_read_but_strings_are_not(tmp_path: Path) -> None:
    module = tmp_path / "mod.py"
    module.write_text(
        '"""Module, fast: ~4 µs a call."""\n'
        "def f():\n"
        '    """Cheaper, ~8x cheaper."""\n'
        "    x = 1  # 1.5x the writes\n"
        '    return "costs ~3 ms" + str(x)\n'
    )
    assert findings(module, tmp_path) == [
        "mod.py:1: '4 µs'",
        "mod.py:3: '~8x'",
        "mod.py:3: '8x cheaper'",
        "mod.py:4: '1.5x the'",
    ]
