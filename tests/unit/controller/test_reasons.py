"""Where a decision reason lives: adding one changes its name in the catalogue
(controller/decision/reasons.py), the table that chooses it and words its message
(controller/decision/table.py), its line in docs/decisions.md, and the table tests
(test_decide_table.py; test_decide_v3.py's table of the default `--protect`) — no other file.

Checked both ways: every reason is in each of those places, and no other file of the
repository enumerates the reasons (names all of them, or checks something against all of
them), so none would have to change. Nothing is keyed by a row number any more."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graceful_drain.controller.decision.reasons import Reason

REPO = Path(__file__).resolve().parents[3]
DECISION = REPO / "src" / "graceful_drain" / "controller" / "decision"
CATALOGUE = DECISION / "reasons.py"
TABLE = DECISION / "table.py"
DOCS = REPO / "docs" / "decisions.md"
TABLE_TESTS = (
    REPO / "tests" / "unit" / "controller" / "test_decide_table.py",
    REPO / "tests" / "unit" / "controller" / "test_decide_v3.py",
)
HOMES = frozenset({CATALOGUE, TABLE, DOCS, *TABLE_TESTS})
# Checking a collection against the whole catalogue: such a file changes with every reason.
_AGAINST_ALL = re.compile(r"(set|frozenset|sorted)\(Reason\)")
_NAMED = re.compile(r"\bReason\.([A-Z_]+)\b")


def named_reasons(text: str) -> set[str]:
    return set(_NAMED.findall(text))


def enumerates_reasons(text: str) -> bool:
    """Names every reason, or compares something with all of them."""
    return named_reasons(text) >= {reason.name for reason in Reason} or bool(
        _AGAINST_ALL.search(text)
    )


def repository_files() -> list[Path]:
    roots = [REPO / "src", REPO / "bench", REPO / "tests", REPO / "docs"]
    files = [path for root in roots for path in root.rglob("*") if path.suffix in (".py", ".md")]
    assert len(files) > 100, "the walk would prove nothing"
    return [REPO / "README.md", *sorted(files)]


@pytest.mark.parametrize("reason", list(Reason), ids=lambda r: r.value)
def test_every_reason_is_in_the_table_its_docs_and_the_table_tests(reason: Reason) -> None:
    assert f"Reason.{reason.name}" in TABLE.read_text(), "the table never chooses it"
    assert f'<a id="{reason.value}"></a>`{reason.value}`' in DOCS.read_text()
    assert any(f"Reason.{reason.name}" in test.read_text() for test in TABLE_TESTS)


def test_no_other_file_enumerates_the_reasons() -> None:
    found = [
        str(path.relative_to(REPO))
        for path in repository_files()
        if path not in HOMES and path.resolve() != Path(__file__).resolve()
        if enumerates_reasons(path.read_text(errors="replace"))
    ]
    assert found == []


def test_the_table_tests_do_enumerate_them() -> None:
    """Control: the check sees an enumeration where there is one."""
    assert all(enumerates_reasons(test.read_text()) for test in TABLE_TESTS)
    listing = ", ".join(f"Reason.{reason.name}" for reason in Reason)
    assert enumerates_reasons(f"KEYED = {{{listing}}}")
    assert enumerates_reasons("assert set(ROW_OF_REASON) == set(Reason)")
    assert not enumerates_reasons("WARNED = {Reason.CANNOT_SURGE, Reason.ERROR}")
