"""Span records: the columnar form every decoder produces and the graph consumes.

One row per span; strings are interned per batch so the graph can map them with one
vectorised lookup. Signals (docs/interface.md, LLM-serving spans) are a float matrix with NaN where absent.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

import numpy as np
import numpy.typing as npt


class Signal(IntEnum):
    """Numeric span signals read from the LLM-serving span conventions, one matrix column each."""

    QUEUE_TIME = 0
    QUEUE_TIME_URGENT = 1
    QUEUE_TIME_ORDINARY = 2
    SCHEDULER_TIME = 3
    TIME_TO_FIRST_TOKEN = 4
    E2E_LATENCY = 5
    PREFILL_TIME = 6
    DECODE_TIME = 7
    INPUT_TOKENS = 8
    OUTPUT_TOKENS = 9
    GPU_DRAM_BYTES = 10
    GPU_DRAM_UTILIZATION = 11
    GPU_L2_SECTORS = 12
    KV_BLOCK_ALLOCATION_RATE = 13
    KV_AVG_BLOCK_SIZE = 14
    KV_USAGE = 15
    NCCL_BYTES = 16
    NCCL_LATENCY = 17
    NUMA_REMOTE_RATIO = 18
    NUMA_MISMATCH = 19
    NCCL_P2P_LATENCY = 20  # point-to-point `nccl:Send` / `nccl:Recv`; collectives are NCCL_LATENCY
    # The request's urgency as the span marks it, 1 urgent, 0 ordinary (a child with a queue time
    # and no mark of its own takes its parent's: vLLM's spans record none, a caller's may):
    URGENT = 21
    # Derived by the graph from span intervals (`rca.graph.lockstep`), never a column of a span batch:
    NCCL_OVERLAP = 22  # share of a collective's time inside its sibling compute span (0-1)


N_SIGNALS = int(Signal.NCCL_OVERLAP)  # columns of a span batch: the signals read from span attributes

# SpanKind values as OTLP numbers them.
KIND_UNSPECIFIED = 0
KIND_INTERNAL = 1
KIND_SERVER = 2
KIND_CLIENT = 3
KIND_PRODUCER = 4
KIND_CONSUMER = 5
# Spans that call out and may name their callee by peer attributes (virtual nodes).
CALLER_KINDS = frozenset({KIND_UNSPECIFIED, KIND_CLIENT, KIND_PRODUCER})


@dataclass(frozen=True, slots=True)
class SpanBatch:
    """Columnar spans. Index columns (`service`, `operation`, `peer`, `resource`, `instance`)
    point into `strings`; `peer` and `resource` are -1 where the span names no such node,
    `instance` where its resource names no instance of its service (`conventions.instance_of`)."""

    trace_id: npt.NDArray[np.uint64]  # (n, 2): high and low 64 bits
    span_id: npt.NDArray[np.uint64]
    parent_id: npt.NDArray[np.uint64]  # 0 for a root
    service: npt.NDArray[np.int32]
    operation: npt.NDArray[np.int32]
    peer: npt.NDArray[np.int32]
    resource: npt.NDArray[np.int32]
    instance: npt.NDArray[np.int32]
    kind: npt.NDArray[np.int8]
    start_ns: npt.NDArray[np.int64]
    end_ns: npt.NDArray[np.int64]
    error: npt.NDArray[np.bool_]
    signals: npt.NDArray[np.float64]  # (n, N_SIGNALS)
    strings: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.span_id.shape[0])

    @property
    def duration_ns(self) -> npt.NDArray[np.int64]:
        return self.end_ns - self.start_ns

    @staticmethod
    def empty() -> SpanBatch:
        return SpanBatch(
            trace_id=np.zeros((0, 2), np.uint64),
            span_id=np.zeros(0, np.uint64),
            parent_id=np.zeros(0, np.uint64),
            service=np.zeros(0, np.int32),
            operation=np.zeros(0, np.int32),
            peer=np.zeros(0, np.int32),
            resource=np.zeros(0, np.int32),
            instance=np.zeros(0, np.int32),
            kind=np.zeros(0, np.int8),
            start_ns=np.zeros(0, np.int64),
            end_ns=np.zeros(0, np.int64),
            error=np.zeros(0, np.bool_),
            signals=np.zeros((0, N_SIGNALS), np.float64),
            strings=(),
        )

    def ended_before(self, cut_ns: int) -> SpanBatch:
        """The spans an exporter has sent by `cut_ns`: a span is exported once it ends, so a
        request still running then is not among them, nor are its later children."""
        return self.select(self.end_ns < cut_ns)

    def select(self, mask: npt.NDArray[np.bool_]) -> SpanBatch:
        """The rows where `mask` holds, sharing the string table."""
        return SpanBatch(
            trace_id=self.trace_id[mask],
            span_id=self.span_id[mask],
            parent_id=self.parent_id[mask],
            service=self.service[mask],
            operation=self.operation[mask],
            peer=self.peer[mask],
            resource=self.resource[mask],
            instance=self.instance[mask],
            kind=self.kind[mask],
            start_ns=self.start_ns[mask],
            end_ns=self.end_ns[mask],
            error=self.error[mask],
            signals=self.signals[mask],
            strings=self.strings,
        )


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why spans of a request were refused (they are counted, never silently lost)."""

    count: int
    reason: str


class Rejections:
    """What every decode result says of the records it refused (`rejections`, counted by
    reason); `UNIT` names a record in messages."""

    __slots__ = ()
    UNIT: ClassVar[str]
    rejections: tuple[Rejection, ...]

    @property
    def rejected(self) -> int:
        return sum(r.count for r in self.rejections)

    @property
    def message(self) -> str:
        return "; ".join(f"{r.count} {self.UNIT}(s): {r.reason}" for r in self.rejections)


@dataclass(frozen=True, slots=True)
class DecodeResult(Rejections):
    """What a decoder made of one request: the accepted spans and the rejected ones."""

    UNIT: ClassVar[str] = "span"
    batch: SpanBatch
    rejections: tuple[Rejection, ...] = ()


class DecodeError(ValueError):
    """A request body that cannot be read at all (a permanent error)."""


class TooLarge(DecodeError):
    """A body over the size limit, before or after decompression."""
