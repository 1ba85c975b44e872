"""The service-causality graph: spans in, event-time windowed statistics per node and edge.

Nodes are services, virtual callees named by peer attributes, and GPU resource nodes. Every
span counts in its own node and operation; a child whose parent lies in another node adds a
caller → callee edge. Children may arrive before their parents: they wait in `pending` until
the parent shows up (resolution runs before every read, so acknowledged spans are visible).
Log records count per node and template at once, and per node-operation once the span they
name is known: they wait for it as children wait for parents. GPU compute spans and the NCCL
collectives beside them (same parent, same rank) wait for each other too (`rca.lockstep`): the
collectives' overlap share counts as a signal, the compute spans' lockstep wait in `OpSum.WAIT`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from numba import njit

from rca.accumulators import EdgeSum, LogSum, OpSum, SignalSum, WindowAggregate
from rca.conventions import GPU_SIGNALS, NCCL_PREFIX
from rca.histogram import buckets
from rca.intindex import IntIndex
from rca.keys import high, low, measure_key, pair_key, signal_key
from rca.lockstep import Lockstep
from rca.logs import LogBatch
from rca.logtemplates import TemplateMiner
from rca.metric_measures import MetricMeasures
from rca.metric_table import MetricTable
from rca.metrics import PLACED_GPU, PLACED_SERVICE, MetricBatch
from rca.spanindex import SpanIndex
from rca.spans import Signal, SpanBatch

if TYPE_CHECKING:
    from rca.call_stats import CallStats

NO_OP = ""
_ON_GPU = np.isin(np.arange(len(Signal)), list(GPU_SIGNALS))  # per signal column
_RESOLVE_MIN = 20_000  # waiting children that trigger a resolution pass during ingest


class NodeKind(StrEnum):
    SERVICE = "service"
    VIRTUAL = "virtual"
    RESOURCE = "resource"


@dataclass(frozen=True, slots=True)
class IngestCounts:
    """Running totals of what the graph did with the spans it was given."""

    spans: int
    edges_resolved: int
    pending: int
    orphaned: int
    outside_retention: int
    log_records: int = 0
    log_templates: int = 0  # templates the miner holds now
    logs_outside_retention: int = 0
    metric_points: int = 0  # data points of mapped metrics counted
    metric_points_unknown: int = 0  # data points of metrics the table does not map
    metrics_outside_retention: int = 0


class Names:
    """Node, operation and node-operation identities, shared by all windows."""

    def __init__(self) -> None:
        self.node_ids: dict[str, int] = {}
        self.nodes: list[str] = []
        self.kinds: list[NodeKind] = []
        self.owners: list[int] = []  # node id of the service that owns each node
        self.op_ids: dict[str, int] = {}
        self.ops: list[str] = []
        self.nccl_ops: list[int] = []  # operations named `nccl:{op}` (docs/interface.md)
        self._nodeops = IntIndex()

    def node(self, name: str, kind: NodeKind, owner: str | None = None) -> int:
        index = self.node_ids.get(name)
        if index is None:
            index = self.node_ids[name] = len(self.nodes)
            self.nodes.append(name)
            self.kinds.append(kind)
            self.owners.append(index if owner is None else self.node(owner, NodeKind.SERVICE))
        elif kind is NodeKind.SERVICE and self.kinds[index] is not NodeKind.SERVICE:
            self.kinds[index] = NodeKind.SERVICE  # a callee we only knew by name now reports spans
            self.owners[index] = index
        return index

    def op(self, name: str) -> int:
        index = self.op_ids.get(name)
        if index is None:
            index = self.op_ids[name] = len(self.ops)
            self.ops.append(name)
            if name.startswith(NCCL_PREFIX):
                self.nccl_ops.append(index)
        return index

    def nodeops(self, nodes: npt.NDArray[np.int64], ops: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return self._nodeops.ids(pair_key(nodes, ops))

    @property
    def nodeop_node(self) -> npt.NDArray[np.int64]:
        """The node of each node-operation id."""
        return high(self._nodeops.keys)

    @property
    def nodeop_op(self) -> npt.NDArray[np.int64]:
        """The operation of each node-operation id."""
        return low(self._nodeops.keys)


@njit(cache=True, nogil=True)
def _present(signals: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, column) of every value that is not NaN, in row-major order."""
    rows, columns = np.empty(signals.size, np.int64), np.empty(signals.size, np.int64)
    n = 0
    for r in range(signals.shape[0]):
        for c in range(signals.shape[1]):
            if not np.isnan(signals[r, c]):
                rows[n], columns[n] = r, c
                n += 1
    return rows[:n], columns[:n]


def _map_strings(
    column: npt.NDArray[np.int32], strings: tuple[str, ...], intern: Callable[[str], int]
) -> npt.NDArray[np.int64]:
    """Graph-wide ids for a column of batch string indices (-1 stays -1), interning each
    string the column uses once."""
    table = np.full(len(strings) + 1, -1, np.int64)  # the last entry answers index -1
    used = np.bincount(column + 1, minlength=len(strings) + 1)[1:]
    for s in np.flatnonzero(used).tolist():
        table[s] = intern(strings[s])
    mapped: npt.NDArray[np.int64] = table[column]
    return mapped


@dataclass(slots=True)
class _PendingLogs:
    """Log records waiting for the span they name, to count on its operation."""

    span: npt.NDArray[np.uint64]
    key: npt.NDArray[np.int64]  # node << 32 | template
    error: npt.NDArray[np.bool_]
    window: npt.NDArray[np.int64]


@dataclass(slots=True)
class _Pending:
    """Children waiting for their parent span."""

    parent: npt.NDArray[np.uint64]
    nodeop: npt.NDArray[np.int64]
    duration_s: npt.NDArray[np.float64]
    error: npt.NDArray[np.bool_]
    window: npt.NDArray[np.int64]


class ServiceGraph:
    """Windowed statistics of the service-causality graph, keyed by span start (event) time."""

    def __init__(
        self,
        *,
        window_seconds: float = 10.0,
        retention_seconds: float = 900.0,
        index_capacity: int = 1_000_000,
        pending_windows: int = 6,
        templates: TemplateMiner | None = None,
        metric_table: MetricTable | None = None,
    ) -> None:
        self.window_ns = int(window_seconds * 1e9)
        self.retention_windows = max(1, int(retention_seconds * 1e9) // self.window_ns)
        self.pending_windows = pending_windows
        self.names = Names()
        self.windows: dict[int, WindowAggregate] = {}
        self.newest_ns = 0
        self._index = SpanIndex(capacity=index_capacity)
        self._pending: list[_Pending] = []
        self._pending_count = 0
        self._resolve_at = _RESOLVE_MIN
        self._spans = self._resolved = self._orphaned = self._late = 0
        self.templates = TemplateMiner() if templates is None else templates  # an empty miner is falsy (len 0)
        self._pending_logs: list[_PendingLogs] = []
        self._pending_log_count = 0
        self._log_records = self._late_logs = 0
        self._lockstep = Lockstep(pending_windows=pending_windows)
        table = MetricTable.default() if metric_table is None else metric_table
        self.measures = MetricMeasures(table, window_seconds=window_seconds)
        self._metric_points = self._late_metrics = 0
        self.span_nodes: set[int] = set()  # nodes spans named: call statistics leave them be

    # -- writing ---------------------------------------------------------------------------

    def _retained(self, times: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], int]:
        """Moves the newest event time on; each time's window, whether that window is within the
        retention, and the oldest window kept."""
        self.newest_ns = max(self.newest_ns, int(times.max()))
        oldest_kept = self.newest_ns // self.window_ns - self.retention_windows + 1
        window: npt.NDArray[np.int64] = times // self.window_ns
        return window, window >= oldest_kept, oldest_kept

    def add(self, batch: SpanBatch) -> None:
        """Adds a batch of spans (any order, any event time within retention)."""
        if len(batch) == 0:
            return
        window, keep, oldest_kept = self._retained(batch.start_ns)
        if not keep.all():
            self._late += int((~keep).sum())
            batch, window = batch.select(keep), window[keep]
        self._spans += len(batch)
        nodes, peers, resources = self._node_ids(batch)
        named = np.concatenate([nodes, peers, resources])
        self.span_nodes.update(np.flatnonzero(np.bincount(named[named >= 0])).tolist())
        ops = self._op_ids(batch)
        nodeop = self.names.nodeops(nodes, ops)
        empty_op = self.names.op(NO_OP)
        peer_nodeop = np.full(len(batch), -1, np.int64)
        has_peer = (peers >= 0) & (peers != nodes)
        if has_peer.any():
            peer_nodeop[has_peer] = self.names.nodeops(peers[has_peer], np.full(int(has_peer.sum()), empty_op))
        duration = batch.duration_ns / 1e9
        self._count_spans(window, nodeop, peer_nodeop, duration, batch.error)
        has_resource = resources >= 0
        collective = ~np.isnan(batch.signals[:, Signal.NCCL_LATENCY])
        gpu_nodeop = np.full(len(batch), -1, np.int64)
        if has_resource.any():
            sel = has_resource
            gpu_nodeop[sel] = self.names.nodeops(resources[sel], ops[sel])
            self._count_ops(window[sel], gpu_nodeop[sel], duration[sel], batch.error[sel])
            self._count_edges(window[sel], nodeop[sel], gpu_nodeop[sel], duration[sel], batch.error[sel])
        if has_resource.any() or collective.any():  # lockstep: GPU compute and NCCL collectives
            self._lockstep.add(
                collective,
                has_resource,
                parent=batch.parent_id,
                node=nodes,
                nodeop=nodeop,
                gpu_nodeop=gpu_nodeop,
                start_ns=batch.start_ns,
                end_ns=batch.end_ns,
                window=window,
            )
        self._count_signals(window, nodes, resources, batch.signals)
        self._index.insert(batch.span_id, nodeop, peer_nodeop, window, duration)
        has_parent = batch.parent_id != 0
        self._pending.append(
            _Pending(
                batch.parent_id[has_parent],
                nodeop[has_parent],
                duration[has_parent],
                batch.error[has_parent],
                window[has_parent],
            )
        )
        self._pending_count += int(has_parent.sum())
        if self._pending_count >= self._resolve_at:
            self.resolve()
            self._resolve_at = max(_RESOLVE_MIN, 2 * self._pending_count)
        self._evict(oldest_kept)

    def add_logs(self, batch: LogBatch) -> None:
        """Adds a batch of log records (any order, any event time within retention)."""
        if len(batch) == 0:
            return
        window, keep, oldest_kept = self._retained(batch.time_ns)
        if not keep.all():
            self._late_logs += int((~keep).sum())
            batch, window = batch.select(keep), window[keep]
        self._log_records += len(batch)
        names = self.names
        nodes = _map_strings(batch.service, batch.strings, lambda name: names.node(name, NodeKind.SERVICE))
        keys = pair_key(nodes, self.templates.ids(batch.body))
        error = batch.is_error
        self._count_logs(window, keys, error, per_operation=False)
        joined = batch.span_id != 0
        self._pending_logs.append(_PendingLogs(batch.span_id[joined], keys[joined], error[joined], window[joined]))
        self._pending_log_count += int(joined.sum())
        if self._pending_log_count >= self._resolve_at:
            self.resolve()
        self._evict(oldest_kept)

    def add_metrics(self, batch: MetricBatch) -> None:
        """Adds a batch of data points (any order, any event time within retention); points of
        metrics the table does not map are counted by name only (`measures.unknown`)."""
        if len(batch) == 0:
            return
        window, keep, oldest_kept = self._retained(batch.time_ns)
        if not keep.all():
            self._late_metrics += int((~keep).sum())
            batch, window = batch.select(keep), window[keep]
        seen = self.measures.observe(batch)
        self._metric_points += int(np.unique(seen.row).shape[0])
        nodes = self._metric_nodes(batch, seen.row)
        self._count_values(window[seen.row], measure_key(nodes, seen.measure), seen.value, metrics=True)
        self._evict(oldest_kept)

    def add_call_stats(self, stats: CallStats) -> None:
        """Adds call statistics aggregated elsewhere (`rca.call_stats`), but where spans named a node."""
        from rca.call_stats import count_call_stats  # it builds on this module

        count_call_stats(self, stats)

    def _metric_nodes(self, batch: MetricBatch, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The graph node of each of `rows`: services by name, GPUs and hosts as resource nodes
        (a GPU owned by the pod its exporter names, else by whoever its spans named)."""
        names, strings = self.names, batch.strings
        columns = np.stack([batch.node[rows], batch.owner[rows], batch.placement[rows]], axis=1).astype(np.int64)
        distinct, inverse = np.unique(columns, axis=0, return_inverse=True)
        ids = np.empty(distinct.shape[0], np.int64)
        for k, (node, owner, placement) in enumerate(distinct.tolist()):
            name = strings[node]
            known = names.node_ids.get(name)  # a node known from spans keeps its kind and owner
            if known is not None:
                ids[k] = known
            elif placement == PLACED_SERVICE:
                ids[k] = names.node(name, NodeKind.SERVICE)
            else:
                named = strings[owner] if placement == PLACED_GPU and owner >= 0 else None
                ids[k] = names.node(name, NodeKind.RESOURCE, named)
        result: npt.NDArray[np.int64] = ids[inverse.reshape(-1)]
        return result

    def _count_logs(
        self,
        window: npt.NDArray[np.int64],
        keys: npt.NDArray[np.int64],
        error: npt.NDArray[np.bool_],
        per_operation: bool,
    ) -> None:
        sums = np.zeros((keys.shape[0], len(LogSum)))
        sums[:, LogSum.RECORDS] = 1.0
        sums[:, LogSum.ERRORS] = error
        for aggregate, index in self._by_window(window):
            (aggregate.log_ops if per_operation else aggregate.logs).add(keys, sums, None, index)

    def _join_logs(self) -> None:
        """Counts waiting log records on the operation of their span where it is now known and
        in the record's node; records whose span does not come in time count on the node only."""
        if not self._pending_logs:
            return
        parts = ((x.span, x.key, x.error, x.window) for x in self._pending_logs)
        p = _PendingLogs(*(np.concatenate(c) for c in zip(*parts, strict=True)))
        self._pending_logs = []
        self._pending_log_count = 0
        newest = self.newest_ns // self.window_ns
        span, _ = self._index.lookup(p.span, newest)
        found = span[:, 0] >= 0
        nodeop = span[found, 0]
        template = low(p.key[found])
        same_node = self.names.nodeop_node[nodeop] == high(p.key[found])
        rows = np.flatnonzero(found)[same_node]
        self._count_logs(p.window[rows], pair_key(nodeop[same_node], template[same_node]), p.error[rows], True)
        keep = ~found & (p.window >= newest - self.pending_windows)
        if keep.any():
            self._pending_log_count = int(keep.sum())
            self._pending_logs.append(_PendingLogs(p.span[keep], p.key[keep], p.error[keep], p.window[keep]))

    def _node_ids(self, batch: SpanBatch) -> tuple[npt.NDArray[np.int64], ...]:
        names, strings = self.names, batch.strings
        nodes = _map_strings(batch.service, strings, lambda name: names.node(name, NodeKind.SERVICE))
        peers = _map_strings(batch.peer, strings, lambda name: names.node(name, NodeKind.VIRTUAL))
        resources = np.full(len(batch), -1, np.int64)
        if (batch.resource >= 0).any():
            pairs = {(int(r), int(s)) for r, s in zip(batch.resource, batch.service, strict=True) if r >= 0}
            lookup = {r: names.node(strings[r], NodeKind.RESOURCE, strings[s]) for r, s in pairs}
            resources = np.asarray([lookup.get(int(r), -1) for r in batch.resource], np.int64)
        return nodes, peers, resources

    def _op_ids(self, batch: SpanBatch) -> npt.NDArray[np.int64]:
        return _map_strings(batch.operation, batch.strings, self.names.op)

    def _window(self, index: int) -> WindowAggregate:
        aggregate = self.windows.get(index)
        if aggregate is None:
            aggregate = self.windows[index] = WindowAggregate.new()
        return aggregate

    def _by_window(self, window: npt.NDArray[np.int64]) -> Iterable[tuple[WindowAggregate, npt.NDArray[np.intp]]]:
        """Each window's aggregate with the rows in it, in their order (one stable sort)."""
        order = np.argsort(window, kind="stable")
        ordered = window[order]
        bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), ordered.shape[0]]
        for begin, end in itertools.pairwise(bounds):
            if begin < end and ordered[begin] >= 0:
                yield self._window(int(ordered[begin])), order[begin:end]

    def _count_ops(
        self,
        window: npt.NDArray[np.int64],
        nodeop: npt.NDArray[np.int64],
        duration: npt.NDArray[np.float64],
        error: npt.NDArray[np.bool_],
    ) -> None:
        sums = np.zeros((nodeop.shape[0], len(OpSum)))
        sums[:, OpSum.CALLS] = 1.0
        sums[:, OpSum.ERRORS] = error
        sums[:, OpSum.DURATION] = duration
        hist = buckets(duration)
        for aggregate, index in self._by_window(window):
            aggregate.ops.add(nodeop, sums, hist, index)

    def _count_edges(
        self,
        window: npt.NDArray[np.int64],
        caller: npt.NDArray[np.int64],
        callee: npt.NDArray[np.int64],
        duration: npt.NDArray[np.float64],
        error: npt.NDArray[np.bool_],
        peer: bool = False,
        gap: npt.NDArray[np.float64] | None = None,
    ) -> None:
        sums = np.zeros((caller.shape[0], len(EdgeSum)))
        base = EdgeSum.PEER_CALLS if peer else EdgeSum.CALLS
        sums[:, base] = 1.0
        sums[:, base + 1] = error
        sums[:, base + 2] = duration
        if gap is not None:
            sums[:, EdgeSum.GAP] = gap
        keys = pair_key(caller, callee)
        hist = buckets(duration)
        for aggregate, index in self._by_window(window):
            aggregate.edges.add(keys, sums, hist, index)

    def _count_spans(
        self,
        window: npt.NDArray[np.int64],
        nodeop: npt.NDArray[np.int64],
        peer_nodeop: npt.NDArray[np.int64],
        duration: npt.NDArray[np.float64],
        error: npt.NDArray[np.bool_],
    ) -> None:
        self._count_ops(window, nodeop, duration, error)
        sel = peer_nodeop >= 0
        if sel.any():
            self._count_edges(window[sel], nodeop[sel], peer_nodeop[sel], duration[sel], error[sel], peer=True)

    def _count_signals(
        self,
        window: npt.NDArray[np.int64],
        node: npt.NDArray[np.int64],
        gpu: npt.NDArray[np.int64],
        signals: npt.NDArray[np.float64],
    ) -> None:
        """Every signal value on its span's node, the GPU's signals on the span's GPU (`gpu` >= 0)."""
        rows, columns = _present(signals)
        if rows.shape[0] == 0:
            return
        on_gpu = _ON_GPU[columns] & (gpu[rows] >= 0)
        where = np.where(on_gpu, gpu[rows], node[rows])
        self._count_values(window[rows], signal_key(where, columns), signals[rows, columns])

    def _count_values(
        self,
        window: npt.NDArray[np.int64],
        keys: npt.NDArray[np.int64],
        values: npt.NDArray[np.float64],
        *,
        metrics: bool = False,
    ) -> None:
        """One observation per row: of a span signal keyed node << 8 | signal, or with
        `metrics` of a metric measure keyed node << 16 | measure."""
        sums = np.stack([np.ones_like(values), values, values * values], axis=1)
        hist = None if metrics else buckets(values)
        for aggregate, index in self._by_window(window):
            (aggregate.metrics if metrics else aggregate.signals).add(keys, sums, hist, index)

    def _count_lockstep(self) -> None:
        """Counts what the waiting lockstep spans matched: each collective's overlap share on its
        node, each compute span's wait on its operation and its GPU's (in retained windows)."""
        newest = self.newest_ns // self.window_ns
        found = self._lockstep.match(newest)
        if found is None:
            return
        oldest = newest - self.retention_windows + 1
        shared = found.collective_window >= oldest
        node, window = found.collective_node[shared], found.collective_window[shared]
        self._count_values(window, signal_key(node, Signal.NCCL_OVERLAP), found.overlap_share[shared])
        nodeop = np.concatenate([found.compute_nodeop, found.compute_gpu_nodeop])  # compute spans ran on a GPU
        window = np.tile(found.compute_window, 2)
        sums = np.zeros((nodeop.shape[0], len(OpSum)))
        sums[:, OpSum.WAIT] = np.tile(found.wait_s, 2)
        kept = np.flatnonzero(window >= oldest)
        for aggregate, index in self._by_window(window[kept]):
            aggregate.ops.add(nodeop, sums, None, kept[index])

    # -- parent resolution -----------------------------------------------------------------

    def resolve(self) -> None:
        """Matches waiting children with parents seen since, and waiting log records with their
        spans, and lockstep collectives with their compute siblings; drops those waited too long."""
        self._join_logs()
        self._count_lockstep()
        if not self._pending:
            return
        p = _Pending(
            *(
                np.concatenate(cols)
                for cols in zip(
                    *((x.parent, x.nodeop, x.duration_s, x.error, x.window) for x in self._pending), strict=True
                )
            )
        )
        self._pending = []
        self._pending_count = 0
        parent, parent_s = self._index.lookup(p.parent, self.newest_ns // self.window_ns)
        found = parent[:, 0] >= 0
        gap = parent_s[found] - p.duration_s[found]
        self._attribute(parent[found], p.nodeop[found], p.duration_s[found], p.error[found], gap)
        waiting = ~found
        stale = p.window < self.newest_ns // self.window_ns - self.pending_windows
        self._orphaned += int((waiting & stale).sum())
        keep = waiting & ~stale
        if keep.any():
            self._pending_count = int(keep.sum())
            self._pending.append(
                _Pending(p.parent[keep], p.nodeop[keep], p.duration_s[keep], p.error[keep], p.window[keep])
            )

    def _attribute(
        self,
        parent: npt.NDArray[np.int64],
        child: npt.NDArray[np.int64],
        duration: npt.NDArray[np.float64],
        error: npt.NDArray[np.bool_],
        gap: npt.NDArray[np.float64],
    ) -> None:
        if child.shape[0] == 0:
            return
        self._resolved += child.shape[0]
        parent_nodeop, parent_peer, window = parent[:, 0], parent[:, 1], parent[:, 2]
        sums = np.zeros((child.shape[0], len(OpSum)))
        sums[:, OpSum.CHILD_DURATION] = duration
        for aggregate, index in self._by_window(window):
            aggregate.ops.add(parent_nodeop, sums, None, index)
        # Every child counts on its parent operation's edge, local ones too: together they are the
        # operation's call structure. Only remote ones make graph edges (`graphview`).
        self._count_edges(window, parent_nodeop, child, duration, error, gap=gap)
        node_of = self.names.nodeop_node
        remote = node_of[parent_nodeop] != node_of[child]
        paired = remote & (parent_peer >= 0)
        if paired.any():
            sums = np.zeros((int(paired.sum()), len(EdgeSum)))
            sums[:, EdgeSum.PAIRED] = 1.0
            keys = pair_key(parent_nodeop[paired], parent_peer[paired])
            for aggregate, index in self._by_window(window[paired]):
                aggregate.edges.add(keys, sums, None, index)

    def _evict(self, oldest_kept: int) -> None:
        for w in [w for w in self.windows if w < oldest_kept]:
            del self.windows[w]

    # -- reading ---------------------------------------------------------------------------

    def aggregate(self, start_ns: int, end_ns: int) -> WindowAggregate:
        """All windows overlapping [start_ns, end_ns), merged (parents resolved first)."""
        self.resolve()
        merged = WindowAggregate.new()
        first, last = start_ns // self.window_ns, (end_ns - 1) // self.window_ns
        for w in sorted(self.windows):
            if first <= w <= last:
                merged.merge(self.windows[w])
        return merged

    def counts(self) -> IngestCounts:
        return IngestCounts(
            self._spans,
            self._resolved,
            self._pending_count,
            self._orphaned,
            self._late,
            self._log_records,
            len(self.templates),
            self._late_logs,
            self._metric_points,
            sum(self.measures.unknown.values()),
            self._late_metrics,
        )

    def nbytes(self) -> int:
        return sum(w.nbytes() for w in self.windows.values())


__all__ = ["EdgeSum", "IngestCounts", "NodeKind", "OpSum", "ServiceGraph", "SignalSum"]
