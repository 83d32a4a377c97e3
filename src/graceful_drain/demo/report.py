"""The demo's figures, its summary table and its JSON document (pure).

Figures are taken over the drain's window, from its start until the run settled (the
workload Ready again after the drain), since an outage a drain causes can outlast the drain:
- drain_completed: the drain client reported the node drained within the demo's budget;
- drain_seconds: from the drain's start until the client returned (or gave up);
- zero_ready_seconds: how long the Deployment had no Ready pod;
- rollouts: ReplicaSets created for the Deployment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesim.availability import zero_ready_seconds

from .timeline import RunRecord, ready_at

PRECISION = 3  # decimals of seconds in the JSON document


@dataclass(frozen=True, slots=True)
class Figures:
    drain_completed: bool
    drain_seconds: float
    zero_ready_seconds: float
    rollouts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "drain_completed": self.drain_completed,
            "drain_seconds": round(self.drain_seconds, PRECISION),
            "zero_ready_seconds": round(self.zero_ready_seconds, PRECISION),
            "rollouts": self.rollouts,
        }


def figures(record: RunRecord) -> Figures:
    end = record.finished if record.finished is not None else record.settled
    return Figures(
        drain_completed=record.drain_completed,
        drain_seconds=max(end - record.started, 0.0),
        zero_ready_seconds=float(
            zero_ready_seconds(
                record.ready,
                record.started,
                record.settled,
                initial=ready_at(record.ready, record.started),
            )
        ),
        rollouts=sum(1 for at, _ in record.replicasets if record.started < at <= record.settled),
    )


def json_document(client: str, with_controller: Figures, without: Figures | None) -> dict[str, Any]:
    document: dict[str, Any] = {"client": client, "with_controller": with_controller.to_json()}
    if without is not None:
        document["without_controller"] = without.to_json()
    return document


def _cells(figures: Figures) -> list[str]:
    return [
        "yes" if figures.drain_completed else "NO",
        f"{figures.drain_seconds:.1f}s",
        f"{figures.zero_ready_seconds:.2f}s",
        str(figures.rollouts),
    ]


ROWS = ("drain completed", "drain duration", "time with no Ready pod", "rollouts (new ReplicaSets)")


def summary_lines(with_controller: Figures, without: Figures | None) -> list[str]:
    columns = [("with graceful-drain", _cells(with_controller))]
    if without is not None:
        columns.append(("without", _cells(without)))
    label_width = max(len(row) for row in ROWS)
    widths = [max(len(title), *(len(cell) for cell in cells)) for title, cells in columns]
    header = " " * label_width + "".join(
        f"  {title:<{width}}" for (title, _), width in zip(columns, widths, strict=True)
    )
    lines = ["summary", "  " + header.rstrip()]
    for index, row in enumerate(ROWS):
        cells = "".join(
            f"  {cells[index]:<{width}}" for (_, cells), width in zip(columns, widths, strict=True)
        )
        lines.append(f"  {row:<{label_width}}{cells}".rstrip())
    return lines
