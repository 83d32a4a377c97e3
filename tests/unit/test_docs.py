"""The user docs: docs/decisions.md is the one decision table, and no doc points outside
the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graceful_drain.controller.decision.reasons import Reason
from graceful_drain.controller.writes.events import WARNING_EVENT_REASON

REPO = Path(__file__).resolve().parents[2]
USER_DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
DECISIONS = REPO / "docs" / "decisions.md"


@pytest.mark.parametrize("reason", list(Reason), ids=lambda r: r.value)
def test_every_reason_is_anchored_once_in_the_table_of_docs_decisions(reason: Reason) -> None:
    lines = [
        line
        for line in DECISIONS.read_text().splitlines()
        if f'<a id="{reason.value}"></a>`{reason.value}`' in line
    ]
    assert len(lines) == 1, reason
    assert lines[0].startswith("| ") and lines[0].rstrip().endswith(f"`{reason.value}` |")


def test_every_warning_event_is_documented() -> None:
    text = DECISIONS.read_text()
    for event in WARNING_EVENT_REASON.values():
        assert f"`{event}`" in text


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_no_user_doc_names_anything_outside_the_repository(doc: Path) -> None:
    text = doc.read_text()
    assert re.search(r"shared/|DESIGN\.md|\bseeds?\b", text) is None


def test_the_code_cites_docs_decisions() -> None:
    source = REPO / "src" / "graceful_drain" / "controller"
    for name in ("decision/table.py", "reconcile/rollout.py", "reconcile/reconciler.py"):
        assert "docs/decisions.md" in (source / name).read_text(), name
    assert "docs/decisions.md" in (REPO / "README.md").read_text()


def test_the_product_cites_decisions_by_reason_not_by_row_number() -> None:
    """Rows get renumbered; `Reason.<NAME>` is anchored in docs/decisions.md and stays."""
    citing = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "src" / "graceful_drain").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\brows? \d", line, re.IGNORECASE)
    ]
    assert citing == []


OPERATOR_DOCS = ("docs/install.md", "charts/graceful-drain/README.md",
                 "charts/graceful-drain/templates/NOTES.txt")  # fmt: skip


@pytest.mark.parametrize("path", OPERATOR_DOCS)
def test_what_an_operator_reads_without_a_checkout_names_no_checkout_path(path: str) -> None:
    """The chart's README and NOTES travel in the .tgz and install.md is read beside the
    release folder: they name the release's files and published paths, never the
    repository's chart folder or its image builder (an oci:// path of your registry is fine)."""
    text = (REPO / path).read_text()
    stray = [line for line in text.splitlines()
             if "imagebuild" in line
             or re.search(r"(?<!oci://REGISTRY/)charts/graceful-drain", line)]  # fmt: skip
    assert stray == []
