"""The differential suite's running count, printed once its module has run."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Tally:
    compared: int = 0
    diverged: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        lines = [f"differential: {self.compared} compared, {len(self.diverged)} diverged"]
        return lines + [f"  {line}" for line in self.diverged]


TALLY = Tally()
