"""Rows waiting in the graph as a slotted dataclass of equal-length arrays: rows picked and parts
joined field by field, whatever the fields."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import fields
from typing import Any, Self, cast

import numpy as np
import numpy.typing as npt


class Columns:
    """Base of a `@dataclass(slots=True)` whose every field is an array of one length per row."""

    __slots__ = ()

    def __len__(self) -> int:
        return len(getattr(self, fields(cast(Any, self))[0].name))

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

    @classmethod
    def in_groups(cls, parts: Sequence[Self], rows: int) -> Iterator[Self]:
        """The rows of `parts` joined into groups of about `rows` (a larger part is a group of its
        own), so that a pass over many waiting rows never copies them all at once."""
        group: list[Self] = []
        size = 0
        for part in parts:
            group.append(part)
            size += len(part)
            if size >= rows:
                yield cls.joined(group)
                group, size = [], 0
        if group:
            yield cls.joined(group)
