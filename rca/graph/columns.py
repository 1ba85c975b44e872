"""Rows waiting in the graph as a slotted dataclass of equal-length arrays: rows picked and parts
joined field by field, whatever the fields."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any, Self, cast

import numpy as np
import numpy.typing as npt


class Columns:
    """Base of a `@dataclass(slots=True)` whose every field is an array of one length per row."""

    __slots__ = ()

    def select(self, rows: npt.NDArray[np.bool_]) -> Self:
        """The rows where `rows` holds."""
        table = cast(Any, self)
        made: Self = type(table)(*(getattr(table, f.name)[rows] for f in fields(table)))
        return made

    @classmethod
    def joined(cls, parts: Sequence[Self]) -> Self:
        """The rows of `parts`, one after another."""
        kind = cast(Any, cls)
        made: Self = kind(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(kind)))
        return made
