"""bench/webhook/instructions.py: reading callgrind's total (valgrind itself is not run here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.webhook import instructions


def test_the_total_is_read_from_a_dump(tmp_path: Path) -> None:
    dump = tmp_path / "callgrind.out.1"
    dump.write_text("version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 123456\n"
                    "fl=(1) x.c\nfn=(1) f\n0 5\ntotals: 123456\n")  # fmt: skip
    assert instructions._total(dump) == 123456


def test_a_dump_without_a_total_is_refused(tmp_path: Path) -> None:
    dump = tmp_path / "callgrind.out.2"
    dump.write_text("version: 1\nevents: Ir\n")
    with pytest.raises(RuntimeError, match="no total"):
        instructions._total(dump)
