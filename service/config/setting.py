"""One row of the settings table: a setting's field, variable, reader, default and doc."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    field: str  # the Settings field
    variable: str  # the environment variable
    reader: Any  # how its value is read and bounded (Int, Float, Switch, ...)
    default: Any
    doc: str  # what it does, for docs/configuration.md
    shown_default: str | None = None  # the default as the docs show it, when not the value
    more_bounds: str = ""  # bounds the reader alone does not tell (checked with other settings)
