"""Plain JSON values as the patch algorithms see them (what ``json.loads`` returns)."""

from typing import TypeAlias

Json: TypeAlias = dict[str, "Json"] | list["Json"] | str | int | float | bool | None
JsonObject: TypeAlias = dict[str, Json]
