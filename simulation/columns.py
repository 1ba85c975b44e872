"""Column assembly: generated spans appended in blocks, then one sorted `SpanBatch` cut into
event-time chunks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields

import numpy as np
import numpy.typing as npt

from rca.telemetry.conventions import with_nccl_latency
from rca.telemetry.spans import N_SIGNALS, Signal, SpanBatch

_COLUMNS = ("trace", "span", "parent", "service", "operation", "peer", "resource", "kind", "start", "end", "error")


class SpanBlocks:
    """Blocks of span columns sharing one string table. `instances` maps a service to the one
    instance its spans run as (an engine replica's host), so every span of it carries that
    instance and every other span none (-1)."""

    def __init__(self, instances: Mapping[str, str]) -> None:
        self._instances = instances
        self._strings: dict[str, int] = {}
        self._blocks: dict[str, list[npt.NDArray[np.generic]]] = {c: [] for c in _COLUMNS}
        self._signals: list[tuple[int, Mapping[Signal, npt.NDArray[np.float64]]]] = []
        self._rows = 0

    def intern(self, names: list[str]) -> npt.NDArray[np.int32]:
        """String-table indices of `names` (added where new)."""
        return np.array([self._strings.setdefault(s, len(self._strings)) for s in names], np.int32)

    def add(
        self,
        columns: Mapping[str, npt.NDArray[np.generic]],
        signals: Mapping[Signal, npt.NDArray[np.float64]] | None = None,
    ) -> None:
        """Appends a block; `columns` holds every name of `_COLUMNS` (string columns as indices)."""
        n = columns["span"].shape[0]
        for name in _COLUMNS:
            self._blocks[name].append(columns[name])
        if signals:
            self._signals.append((self._rows, signals))
        self._rows += n

    def build(self) -> SpanBatch:
        """Every span, sorted by start time; NCCL latency filled in from `nccl:` span durations."""
        c = {name: np.concatenate(blocks) for name, blocks in self._blocks.items()}
        instance = self._instance_of_string()[c["service"]]
        signals = np.full((self._rows, N_SIGNALS), math.nan)
        for offset, block in self._signals:
            for signal, values in block.items():
                signals[offset : offset + values.shape[0], signal] = values
        strings = tuple(self._strings)
        signals = with_nccl_latency(signals, strings, c["operation"], c["start"], c["end"])
        order = np.argsort(c["start"], kind="stable")
        return SpanBatch(
            trace_id=c["trace"][order].astype(np.uint64),
            span_id=c["span"][order].astype(np.uint64),
            parent_id=c["parent"][order].astype(np.uint64),
            service=c["service"][order].astype(np.int32),
            operation=c["operation"][order].astype(np.int32),
            peer=c["peer"][order].astype(np.int32),
            resource=c["resource"][order].astype(np.int32),
            instance=instance[order],
            kind=c["kind"][order].astype(np.int8),
            start_ns=c["start"][order].astype(np.int64),
            end_ns=c["end"][order].astype(np.int64),
            error=c["error"][order].astype(np.bool_),
            signals=signals[order],
            strings=strings,
        )

    def _instance_of_string(self) -> npt.NDArray[np.int32]:
        """Per string of the table, the instance of the service it names (-1: none), so a
        service column maps to its instance column in one lookup; interns the instances."""
        lookup = np.full(len(self._strings), -1, np.int32)
        named = [service for service in self._instances if service in self._strings]
        lookup[self.intern(named)] = self.intern([self._instances[service] for service in named])
        return lookup


def chunk_bounds(times: npt.NDArray[np.int64], start_ns: int, seconds: float) -> list[tuple[int, int]]:
    """Row ranges of consecutive event-time chunks of sorted `times` (empty chunks left out)."""
    if times.shape[0] == 0:
        return []
    width = int(seconds * 1e9)
    edges = np.searchsorted(times, np.arange(start_ns + width, int(times[-1]) + width + 1, width))
    bounds = np.unique(np.concatenate([[0], edges, [times.shape[0]]]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))


def chunks(batch: SpanBatch, start_ns: int, seconds: float) -> tuple[SpanBatch, ...]:
    """Consecutive event-time chunks of a start-sorted batch (empty chunks left out)."""
    return tuple(_rows(batch, lo, hi) for lo, hi in chunk_bounds(batch.start_ns, start_ns, seconds))


def _rows(batch: SpanBatch, lo: int, hi: int) -> SpanBatch:
    columns = {f.name: getattr(batch, f.name) for f in fields(batch) if f.name != "strings"}
    return SpanBatch(**{name: column[lo:hi] for name, column in columns.items()}, strings=batch.strings)
