"""Tables as markdown and JSON: formatting, verdicts, notes, numbers JSON can carry."""

from __future__ import annotations

import json
import math

import pytest
from bench.report import Column, Table, fixed, json_document, markdown, markdown_table, percent
from bench.stats import Bound, Target, evaluate


def sample_table() -> Table:
    table = Table(
        "webhook",
        "Throughput",
        [Column("server", "server"), Column("rps", "req/s", fixed(0)),
         Column("share", "vs reference", percent)],
    )  # fmt: skip
    table.add(server="reference", rps=17234.4, share=None)
    table.add(server="web|hook", rps=9001.0, share=0.522)
    table.verdicts.append(evaluate(Target("ratio", Bound.AT_LEAST, 0.5), 0.522, "concurrency 32"))
    table.verdicts.append(evaluate(Target("p99", Bound.BELOW, 10, " ms"), 12.5, "concurrency 32"))
    table.notes.append("a note")
    return table


def test_markdown_table_renders_rows_verdicts_and_notes() -> None:
    text = markdown_table(sample_table())
    assert text.splitlines()[:6] == [
        "### Throughput",
        "",
        "| server | req/s | vs reference |",
        "|---|---|---|",
        "| reference | 17,234 | — |",
        "| web\\|hook | 9,001 | 52% |",
    ]
    assert "- met: ratio >= 0.5 (concurrency 32) — measured 0.522" in text
    assert "- MISSED: p99 < 10 ms (concurrency 32) — measured 12.5" in text
    assert text.rstrip().endswith("- a note")


def test_adding_an_unknown_column_is_refused() -> None:
    with pytest.raises(KeyError, match="nope"):
        sample_table().add(nope=1)


@pytest.mark.parametrize(
    ("render", "value", "text"),
    [
        (fixed(2), 1234.5678, "1,234.57"),
        (fixed(0), 3, "3"),
        (fixed(1), None, "—"),
        (fixed(1), math.nan, "n/a"),
        (fixed(1), "text", "text"),
        (fixed(1), True, "yes"),
        (percent, 0.505, "50%"),
        (percent, 1.25, "125%"),
        (percent, None, "—"),
    ],
)
def test_cell_rendering(render: object, value: object, text: str) -> None:
    assert render(value) == text  # type: ignore[operator]


def test_all_met() -> None:
    table = sample_table()
    assert not table.all_met
    table.verdicts.pop()
    assert table.all_met


def test_json_document_keeps_raw_values_and_drops_non_finite_numbers() -> None:
    table = sample_table()
    table.add(server="broken", rps=math.nan, share=math.inf)
    document = json_document([table], {"cpu": "test"})
    text = json.dumps(document, allow_nan=False)  # strict JSON: no NaN/Infinity
    [loaded] = json.loads(text)["tables"]
    assert loaded["rows"][0] == {"server": "reference", "rps": 17234.4, "share": None}
    assert loaded["rows"][2] == {"server": "broken", "rps": None, "share": None}
    assert [t["met"] for t in loaded["targets"]] == [True, False]
    assert loaded["targets"][1]["target"] == "p99 < 10 ms"
    assert document["machine"] == {"cpu": "test"}


def test_markdown_document_has_the_machine_header() -> None:
    text = markdown([sample_table()], {"cpu": "Xeon, 2 cores"})
    assert text.startswith("## Benchmark results\n\n- cpu: Xeon, 2 cores\n")
    assert "### Throughput" in text
