"""What a root-cause ranking is (docs/interface.md, HTTP API: `CAUSES`), and the interface that makes one.

The incident layer asks a `Ranker` for the causes behind the alerting nodes over a window of the
service graph; the Bayesian ranker in `models/` is the one rca serves.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rca.ranking.pull import SourceStatus
from rca.telemetry.faults import Fault

if TYPE_CHECKING:
    from rca.graph.service_graph import ServiceGraph

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Evidence:
    """One signal of a node: what the window showed against its baseline, and how anomalous."""

    signal: str
    observed: float
    baseline: float
    score: float


@dataclass(frozen=True, slots=True)
class Cause:
    """A candidate root cause; `path` runs from the cause to the alerting service."""

    rank: int
    node: str
    service: str
    fault: Fault
    probability: float
    evidence: tuple[Evidence, ...]
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SimultaneousRoot:
    """One of several roots that explain the evidence better together than any one alone:
    `probability` is that it is one of them."""

    node: str
    service: str
    fault: Fault
    probability: float


@dataclass(frozen=True, slots=True)
class Ranking:
    """Every candidate node, most probable first; probabilities sum to 1. `simultaneous` is
    empty unless several roots at once explain the evidence better than one (best first).
    `sources` says which telemetry sources the ranking read and whether each answered."""

    start_ns: int
    end_ns: int
    model: str
    inference_ms: float
    causes: tuple[Cause, ...]
    onset_ns: int | None = None  # where the change began, as the ranker located it
    simultaneous: tuple[SimultaneousRoot, ...] = ()
    sources: tuple[SourceStatus, ...] = ()


def from_columns(cls: type[T], columns: Mapping[str, Sequence[Any]]) -> list[T]:
    """Instances of `cls`, a frozen slotted dataclass without `__post_init__` (`Cause`,
    `Evidence`), from one column per field: each field set through its slot for every instance
    at once, as `__init__` would set it one instance at a time (a ranking makes thousands of
    causes and evidence: a frozen `__init__` costs 2.5 times as much)."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    if "__slots__" not in vars(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} is not a slotted dataclass without __post_init__")
    if sorted(columns) != sorted(names):
        raise TypeError(f"{cls.__name__} takes the columns {names}, not {list(columns)}")
    made = [object.__new__(cls) for _ in range(len(columns[names[0]]))]
    for name in names:
        column = columns[name]
        if len(column) != len(made):
            raise ValueError(f"column {name!r} has {len(column)} values, not {len(made)}")
        deque(map(getattr(cls, name).__set__, made, column), maxlen=0)  # runs the setter on each
    return made


class Ranker(Protocol):
    """Ranks the root causes of alerts on `alert_nodes` from the graph over [start_ns, end_ns)."""

    def rank(self, graph: ServiceGraph, *, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> Ranking: ...
