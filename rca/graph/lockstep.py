"""Lockstep spans (docs/interface.md, LLM-serving spans): how much of each NCCL collective overlaps its sibling
compute span, and how much of each compute span was spent waiting in collectives.

A collective's overlap share is of the time it ran before its compute sibling ended: a rank
whose collective begins only after its own compute (its communication no longer overlapping it)
reads 0, while a peer waiting for that rank, whose collective began inside its compute and runs
on past it, still reads 1 (its wait shows as the collective's time, not as lost overlap).

A collective (an `nccl:` span that is not point-to-point) and a compute span (one that ran on a
GPU: it names `gpu.id`) are siblings when they share their parent span and their node (the rank's
service). Siblings may arrive in different exports, so both kinds wait here, as columns, until
`match` pairs them: each collective is matched once (its overlap share is what it reports) and
leaves; a compute span stays until it is stale, for collectives still to come, and accumulates
the time its collectives overlapped it (its lockstep wait, at most its own duration). Matching
is one sort and one compiled merge over the waiting spans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(slots=True)
class _Spans:
    """Waiting spans. `nodeop`, `gpu_nodeop` and `waited` describe compute spans (-1, -1, 0 for
    collectives): the node-operations their wait counts on, and the wait counted so far (s)."""

    parent: U64
    node: I64
    start_ns: I64
    end_ns: I64
    window: I64
    nodeop: I64
    gpu_nodeop: I64
    waited: F64

    @staticmethod
    def concat(parts: list[_Spans]) -> _Spans:
        return _Spans(*(np.concatenate(column) for column in zip(*(_columns(p) for p in parts), strict=True)))

    def select(self, rows: npt.NDArray[np.intp] | npt.NDArray[np.bool_]) -> _Spans:
        return _Spans(*(column[rows] for column in _columns(self)))

    def __len__(self) -> int:
        return int(self.parent.shape[0])


def _columns(spans: _Spans) -> tuple[npt.NDArray[Any], ...]:
    return (
        spans.parent,
        spans.node,
        spans.start_ns,
        spans.end_ns,
        spans.window,
        spans.nodeop,
        spans.gpu_nodeop,
        spans.waited,
    )


@dataclass(frozen=True, slots=True)
class LockstepMatch:
    """What one `match` found. Collectives: node, window and overlap share of each matched one
    (of the time it ran before its compute siblings ended: 0 for one begun after them).
    Compute spans: node-operations (its own and its GPU's), window and the wait added to each."""

    collective_node: I64
    collective_window: I64
    overlap_share: F64
    compute_nodeop: I64
    compute_gpu_nodeop: I64
    compute_window: I64
    wait_s: F64


@njit(cache=True, nogil=True)
def _overlaps(
    c_parent: U64, c_node: I64, c_start: I64, c_end: I64, g_parent: U64, g_node: I64, g_start: I64, g_end: I64
) -> tuple[F64, F64, npt.NDArray[np.bool_], F64]:
    """Merge of collectives and compute spans, both sorted by (parent, node): per collective the
    ns it overlaps its siblings, the ns it ran before each ended (summed), and whether it has any;
    per compute span the ns overlapped."""
    overlap, before, matched, wait = (
        np.zeros(c_parent.shape[0]),
        np.zeros(c_parent.shape[0]),
        np.zeros(c_parent.shape[0], np.bool_),
        np.zeros(g_parent.shape[0]),
    )
    i = j = 0
    while i < c_parent.shape[0] and j < g_parent.shape[0]:
        if c_parent[i] < g_parent[j] or (c_parent[i] == g_parent[j] and c_node[i] < g_node[j]):
            i += 1
        elif c_parent[i] > g_parent[j] or c_node[i] > g_node[j]:
            j += 1
        else:
            end = j
            while end < g_parent.shape[0] and g_parent[end] == c_parent[i] and g_node[end] == c_node[i]:
                end += 1
            parent, node = c_parent[i], c_node[i]
            while i < c_parent.shape[0] and c_parent[i] == parent and c_node[i] == node:
                matched[i] = True
                for k in range(j, end):
                    ns = min(c_end[i], g_end[k]) - max(c_start[i], g_start[k])
                    before[i] += max(min(c_end[i], g_end[k]) - c_start[i], 0)
                    if ns > 0:
                        overlap[i] += ns
                        wait[k] += ns
                i += 1
            j = end
    return overlap, before, matched, wait


class Lockstep:
    """Collectives and compute spans waiting for their siblings."""

    def __init__(self, *, pending_windows: int) -> None:
        self.pending_windows = pending_windows
        self._collectives: list[_Spans] = []
        self._compute: list[_Spans] = []
        self._added = False  # spans arrived since the last match: only then can a new pair form

    def add(
        self,
        collective: npt.NDArray[np.bool_],
        compute: npt.NDArray[np.bool_],
        *,
        parent: U64,
        node: I64,
        nodeop: I64,
        gpu_nodeop: I64,
        start_ns: I64,
        end_ns: I64,
        window: I64,
    ) -> None:
        """Spans of one batch: rows where `collective` holds are collectives, rows where
        `compute` holds compute spans (the other columns are per row of the batch)."""
        for mask, kind in ((collective & (parent != 0), self._collectives), (compute & (parent != 0), self._compute)):
            if mask.any():
                n = int(mask.sum())
                own = nodeop[mask] if kind is self._compute else np.full(n, -1, np.int64)
                gpu = gpu_nodeop[mask] if kind is self._compute else np.full(n, -1, np.int64)
                kind.append(
                    _Spans(parent[mask], node[mask], start_ns[mask], end_ns[mask], window[mask], own, gpu, np.zeros(n))
                )
                self._added = True

    def match(self, newest_window: int) -> LockstepMatch | None:
        """Pairs waiting collectives with their compute siblings; drops spans waited too long
        (older than `pending_windows` before `newest_window`). None when no collective waits or
        no span arrived since the last match (the spans still waiting can't pair anew)."""
        if not self._collectives or not self._added:
            self._collectives = self._fresh(self._collectives, newest_window)
            self._compute = self._fresh(self._compute, newest_window)
            return None
        self._added = False
        c = _Spans.concat(self._collectives)
        g = _Spans.concat(self._compute) if self._compute else _empty()
        c_order, g_order = np.lexsort((c.node, c.parent)), np.lexsort((g.node, g.parent))
        c, g = c.select(c_order), g.select(g_order)
        overlap_ns, before_ns, matched, wait_ns = _overlaps(
            c.parent, c.node, c.start_ns, c.end_ns, g.parent, g.node, g.start_ns, g.end_ns
        )
        shared = matched & (c.end_ns > c.start_ns)
        g_duration_s = (g.end_ns - g.start_ns) / 1e9
        added = np.minimum(g.waited + wait_ns / 1e9, g_duration_s) - g.waited
        g.waited += added
        waited = added > 0
        self._collectives = self._fresh([c.select(~matched)], newest_window)
        self._compute = self._fresh([g], newest_window)
        return LockstepMatch(
            collective_node=c.node[shared],
            collective_window=c.window[shared],
            overlap_share=np.minimum(overlap_ns[shared] / np.maximum(before_ns[shared], 1.0), 1.0),
            compute_nodeop=g.nodeop[waited],
            compute_gpu_nodeop=g.gpu_nodeop[waited],
            compute_window=g.window[waited],
            wait_s=added[waited],
        )

    def _fresh(self, parts: list[_Spans], newest_window: int) -> list[_Spans]:
        """The spans of `parts` not yet stale, as one part (none when all are)."""
        if not parts:
            return []
        spans = _Spans.concat(parts)
        kept = spans.select(spans.window >= newest_window - self.pending_windows)
        return [kept] if len(kept) else []

    def __len__(self) -> int:
        return sum(len(s) for s in (*self._collectives, *self._compute))


def _empty() -> _Spans:
    none = np.zeros(0, np.int64)
    return _Spans(np.zeros(0, np.uint64), none, none, none, none, none, none, np.zeros(0))
