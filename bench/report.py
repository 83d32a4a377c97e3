"""Result tables, rendered as markdown (for people and the README) or JSON (for tools).

A `Table` keeps raw values; columns say how to print them. Every table also carries its
targets, evaluated, and notes: a missed target is printed as MISSED with the note saying why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.stats import Verdict

Cell = str | int | float | bool | None
Row = dict[str, Cell]


def fixed(digits: int) -> Callable[[Cell], str]:
    """Numbers with `digits` decimals and thousands separators."""

    def render(value: Cell) -> str:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return _plain(value)
        if math.isnan(value):
            return "n/a"
        return f"{value:,.{digits}f}"

    return render


def percent(value: Cell) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return _plain(value)
    return f"{value * 100:.0f}%"


def _plain(value: Cell) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    header: str
    render: Callable[[Cell], str] = _plain


@dataclass
class Table:
    key: str  # stable id in the JSON output, e.g. "webhook"
    title: str
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, **cells: Cell) -> None:
        unknown = set(cells) - {column.key for column in self.columns}
        if unknown:
            raise KeyError(f"{self.key}: no column {sorted(unknown)}")
        self.rows.append(dict(cells))

    @property
    def all_met(self) -> bool:
        return all(verdict.met for verdict in self.verdicts)


def markdown_table(table: Table) -> str:
    lines = [f"### {table.title}", ""]
    lines.append("| " + " | ".join(column.header for column in table.columns) + " |")
    lines.append("|" + "|".join("---" for _ in table.columns) + "|")
    for row in table.rows:
        cells = (column.render(row.get(column.key)) for column in table.columns)
        lines.append("| " + " | ".join(_escape(cell) for cell in cells) + " |")
    if table.verdicts:
        lines.append("")
        lines.append("Targets:")
        for verdict in table.verdicts:
            where = f" ({verdict.where})" if verdict.where else ""
            value = "no value" if verdict.value is None else f"{verdict.value:.4g}"
            lines.append(f"- {verdict.text}: {verdict.target.describe()}{where} — measured {value}")
    if table.notes:
        lines.append("")
        lines.extend(f"- {note}" for note in table.notes)
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(tables: Iterable[Table], header: Mapping[str, str]) -> str:
    parts = ["## Benchmark results", ""]
    parts.extend(f"- {key}: {value}" for key, value in header.items())
    parts.append("")
    parts.extend(markdown_table(table) for table in tables)
    return "\n".join(parts)


def json_document(tables: Iterable[Table], header: Mapping[str, str]) -> dict[str, Any]:
    return {
        "machine": dict(header),
        "tables": [
            {
                "key": table.key,
                "title": table.title,
                "columns": [{"key": c.key, "header": c.header} for c in table.columns],
                "rows": [_json_row(row) for row in table.rows],
                "targets": [
                    {
                        "target": verdict.target.describe(),
                        "where": verdict.where,
                        "value": _json_number(verdict.value),
                        "met": verdict.met,
                    }
                    for verdict in table.verdicts
                ],
                "notes": list(table.notes),
            }
            for table in tables
        ],
    }


def _json_row(row: Row) -> dict[str, Cell]:
    return {key: _json_number(value) if isinstance(value, float) else value
            for key, value in row.items()}  # fmt: skip


def _json_number(value: float | None) -> float | None:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return value
