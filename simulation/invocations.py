"""What the generator knows about each operation invocation beyond its spans: the call tree,
the attempt kind and which fault effects hit it. The log writer reads it (a service logs while
it serves a request), so its logs follow the same requests, code paths and failures as its spans."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
SEQ = 1024  # sibling order key: call index * SEQ + position among that call's repeats


class Attempt(IntEnum):
    OK = 0
    FAILED = 1  # a transient failure, retried (the callee fails fast and calls nothing)
    TIMED_OUT = 2  # the client's deadline passed before the callee answered, retried


@dataclass(frozen=True, slots=True)
class Invocations:
    """One row per invocation (the operation's own span, SERVER for remote calls and roots)."""

    op: I64
    parent: I64  # row of the calling invocation, -1 for a root
    seq: I64  # call index * SEQ + repeat position
    attempt: I64  # Attempt
    trace_id: npt.NDArray[np.uint64]  # (n, 2)
    span_id: npt.NDArray[np.uint64]
    start_ns: I64
    end_ns: I64
    error: Bools  # the span's final status, propagated errors included
    failing: Bools  # failed by an `errors` fault
    caught: Bools  # an `errors` fault's exception, caught by the handler (it succeeded, skipping calls)
    hit: Bools  # the fault applies (target service, replica, during the fault)
    echoed: Bools  # a callee the fault's changed requests send down another branch (`faults.Echo`)
    hiccup: npt.NDArray[np.float64]  # slowdown of a noisy service's hiccup, 1 outside

    def __len__(self) -> int:
        return int(self.op.shape[0])

    @property
    def call_index(self) -> I64:
        """Which of its caller's calls each row answers (-1 for roots)."""
        result: I64 = np.where(self.parent >= 0, self.seq // SEQ, -1)
        return result
