"""The service-causality graph: spans in, event-time windowed statistics per node and edge.

Nodes are services, virtual callees named by peer attributes, and GPU resource nodes. Every
span counts in its own node and operation; a child whose parent lies in another node adds a
caller → callee edge. Children may arrive before their parents: they wait in `pending` until
the parent shows up (resolution runs before every read, so acknowledged spans are visible).
Log records count per node and template at once, and per node-operation once the span they
name is known: they wait for it as children wait for parents. GPU compute spans and the NCCL
collectives beside them (same parent, same rank) wait for each other too (`rca.graph.lockstep`): the
collectives' overlap share counts as a signal, the compute spans' lockstep wait in `OpSum.WAIT`.
A queue time whose span marks no urgency (vLLM's) counts as urgent or ordinary once a span of its
trace is found marking the request so (`rca.graph.urgency`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from rca.graph.accumulators import EdgeSum, OpSum, WindowAggregate
from rca.graph.child_time import covered_credit
from rca.graph.columns import Columns
from rca.graph.keys import high, low, measure_key, pair_key, signal_key
from rca.graph.lockstep import Lockstep
from rca.graph.logtemplates import TemplateMiner
from rca.graph.metric_measures import MetricMeasures, per_reading
from rca.graph.names import NO_OP, Names, NodeKind, map_strings, metric_nodes, span_nodes, span_signal_nodes
from rca.graph.spanindex import SpanIndex
from rca.graph.urgency import RequestUrgency
from rca.graph.waiting import WaitLimit
from rca.graph.windows import Windows, by_window, count_edges, count_logs, count_ops, count_values, evict, present
from rca.telemetry.conventions import GPU_SIGNALS
from rca.telemetry.logs import LogBatch
from rca.telemetry.metric_table import MetricTable
from rca.telemetry.metrics import MetricBatch
from rca.telemetry.spans import Signal, SpanBatch

if TYPE_CHECKING:
    from rca.graph.call_stats import CallStats

_ON_GPU = np.isin(np.arange(len(Signal)), list(GPU_SIGNALS))  # per signal column
_RESOLVE_MIN = 20_000  # waiting children (or log records) that start a resolution pass during ingest, at least
_MARKS_SHARE = 4  # the urgency marks' index is sized at 1/this of the span index's capacity
_JOIN_GROUP = 65_536  # waiting log records looked up at once


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


@dataclass(slots=True)
class _PendingLogs(Columns):
    """Log records waiting for the span they name, to count on its operation."""

    span: npt.NDArray[np.uint64]
    key: npt.NDArray[np.int64]  # node << 32 | template
    error: npt.NDArray[np.bool_]
    window: npt.NDArray[np.int64]
    since: npt.NDArray[np.int32]  # the span index's generation when last looked up in vain (0: not yet)
    entered: npt.NDArray[np.int64]  # the spans arrived when it began to wait (`WaitLimit`)


@dataclass(slots=True)
class _Pending(Columns):
    """Children waiting for their parent span."""

    parent: npt.NDArray[np.uint64]
    nodeop: npt.NDArray[np.int64]
    start_ns: npt.NDArray[np.int64]
    end_ns: npt.NDArray[np.int64]
    error: npt.NDArray[np.bool_]
    window: npt.NDArray[np.int64]
    since: npt.NDArray[np.int32]  # as `_PendingLogs.since`
    entered: npt.NDArray[np.int64]  # as `_PendingLogs.entered`


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
        # children, log records and queue times wait for their span this long (and as many spans)
        self.wait = WaitLimit(pending_windows, index_capacity, self.retention_windows)
        self.names = Names()
        self.windows: Windows = {}
        self.newest_ns = 0
        self._index = SpanIndex(capacity=index_capacity)
        self._urgency = RequestUrgency(capacity=max(1, index_capacity // _MARKS_SHARE), limit=self.wait)
        self._pending: list[_Pending] = []
        self._pending_count = 0
        self._resolve_at = self._resolve_logs_at = _RESOLVE_MIN  # waiting children, waiting log records
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
        nodes, peers, resources = span_nodes(self.names, batch)
        signal_nodes = span_signal_nodes(self.names, batch, nodes, resources)
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
        # compute: a span on a GPU that is no NCCL call (collectives and sends may name the GPU too)
        compute = has_resource & ~collective & np.isnan(batch.signals[:, Signal.NCCL_P2P_LATENCY])
        gpu_nodeop = np.full(len(batch), -1, np.int64)
        if has_resource.any():
            sel = has_resource
            gpu_nodeop[sel] = self.names.nodeops(resources[sel], ops[sel])
            count_ops(self.windows, window[sel], gpu_nodeop[sel], duration[sel], batch.error[sel])
            count_edges(self.windows, window[sel], nodeop[sel], gpu_nodeop[sel], duration[sel], batch.error[sel])
        if has_resource.any() or collective.any():  # lockstep: GPU compute and NCCL collectives
            self._lockstep.add(
                collective,
                compute,
                parent=batch.parent_id,
                node=signal_nodes,
                nodeop=nodeop,
                gpu_nodeop=gpu_nodeop,
                start_ns=batch.start_ns,
                end_ns=batch.end_ns,
                window=window,
            )
        self._count_signals(window, signal_nodes, resources, batch.signals)
        self._index.insert(batch.span_id, nodeop, peer_nodeop, window, duration, batch.error)
        urgent, queue_s = batch.signals[:, Signal.URGENT], batch.signals[:, Signal.QUEUE_TIME]
        self._urgency.add(batch.trace_id, urgent, queue_s, signal_nodes, window, self._spans)
        has_parent = batch.parent_id != 0
        fresh, entered = np.zeros(len(batch), np.int32), np.full(len(batch), self._spans, np.int64)
        waiting = _Pending(batch.parent_id, nodeop, batch.start_ns, batch.end_ns, batch.error, window, fresh, entered)
        self._pending.append(waiting.select(has_parent))
        self._pending_count += int(has_parent.sum())
        if self._pending_count >= self._resolve_at:
            self.resolve()
        evict(self.windows, oldest_kept)

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
        nodes = map_strings(batch.service, batch.strings, lambda name: names.node(name, NodeKind.SERVICE))
        keys = pair_key(nodes, self.templates.ids(batch.body))
        error = batch.is_error
        count_logs(self.windows, window, keys, error, per_operation=False)
        joined = batch.span_id != 0
        n_joined = int(joined.sum())
        fresh, entered = np.zeros(n_joined, np.int32), np.full(n_joined, self._spans, np.int64)
        waiting = _PendingLogs(batch.span_id[joined], keys[joined], error[joined], window[joined], fresh, entered)
        self._pending_logs.append(waiting)
        self._pending_log_count += n_joined
        if self._pending_log_count >= self._resolve_logs_at:
            self.resolve()
        evict(self.windows, oldest_kept)

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
        self._metric_points += int(np.count_nonzero(np.bincount(seen.row, minlength=len(batch))))
        keys = measure_key(metric_nodes(self.names, batch, seen.row), seen.measure)
        first, keys, values = per_reading(keys, batch.time_ns[seen.row], seen.value)
        count_values(self.windows, window[seen.row][first], keys, values, metrics=True)
        evict(self.windows, oldest_kept)

    def add_call_stats(self, stats: CallStats) -> None:
        """Adds call statistics aggregated elsewhere (`rca.graph.call_stats`), but where spans named a node."""
        from rca.graph.call_stats import count_call_stats  # it builds on this module

        count_call_stats(self, stats)

    def _join_logs(self) -> None:
        """Counts waiting log records on the operation of their span where it is now known and
        in the record's node; records whose span does not come in time count on the node only.
        Records whose span never comes (logs of sampled-out traces) wait their time out in every
        pass, so a pass goes group by group."""
        waiting, self._pending_logs, self._pending_log_count = self._pending_logs, [], 0
        newest = self.newest_ns // self.window_ns
        for p in _PendingLogs.in_groups(waiting, _JOIN_GROUP):
            span, _ = self._index.lookup(p.span, newest, p.since)
            found = span[:, 0] >= 0
            nodeop = span[found, 0]
            template = low(p.key[found])
            same_node = self.names.nodeop_node[nodeop] == high(p.key[found])
            rows = np.flatnonzero(found)[same_node]
            keys = pair_key(nodeop[same_node], template[same_node])
            count_logs(self.windows, p.window[rows], keys, p.error[rows], per_operation=True)
            keep = ~found & self.wait.waiting(p.window, p.entered, newest, self._spans)
            if keep.any():
                self._pending_log_count += int(keep.sum())
                self._pending_logs.append(p.select(keep))

    def _op_ids(self, batch: SpanBatch) -> npt.NDArray[np.int64]:
        return map_strings(batch.operation, batch.strings, self.names.op)

    def _count_spans(
        self,
        window: npt.NDArray[np.int64],
        nodeop: npt.NDArray[np.int64],
        peer_nodeop: npt.NDArray[np.int64],
        duration: npt.NDArray[np.float64],
        error: npt.NDArray[np.bool_],
    ) -> None:
        count_ops(self.windows, window, nodeop, duration, error)
        sel = peer_nodeop >= 0
        if sel.any():
            count_edges(self.windows, window[sel], nodeop[sel], peer_nodeop[sel], duration[sel], error[sel], peer=True)

    def _count_signals(
        self,
        window: npt.NDArray[np.int64],
        node: npt.NDArray[np.int64],
        gpu: npt.NDArray[np.int64],
        signals: npt.NDArray[np.float64],
    ) -> None:
        """Every signal value on its span's node, the GPU's signals on the span's GPU (`gpu` >= 0)."""
        rows, columns = present(signals)
        if rows.shape[0] == 0:
            return
        on_gpu = _ON_GPU[columns] & (gpu[rows] >= 0)
        where = np.where(on_gpu, gpu[rows], node[rows])
        count_values(self.windows, window[rows], signal_key(where, columns), signals[rows, columns])

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
        count_values(self.windows, window, signal_key(node, Signal.NCCL_OVERLAP), found.overlap_share[shared])
        nodeop = np.concatenate([found.compute_nodeop, found.compute_gpu_nodeop])  # compute spans ran on a GPU
        window = np.tile(found.compute_window, 2)
        sums = np.zeros((nodeop.shape[0], len(OpSum)))
        sums[:, OpSum.WAIT] = np.tile(found.wait_s, 2)
        kept = np.flatnonzero(window >= oldest)
        for aggregate, index in by_window(self.windows, window[kept]):
            aggregate.ops.add(nodeop, sums, None, kept[index])

    # -- parent resolution -----------------------------------------------------------------

    def resolve(self) -> None:
        """Matches waiting children with parents seen since, and waiting log records with their
        spans, and lockstep collectives with their compute siblings; drops those waited too long."""
        self._join_logs()
        self._count_lockstep()
        self._count_urgency()
        self._resolve_children()
        # The next pass during ingest comes once as many again wait: records and children whose
        # span never comes (logs of sampled-out traces) cost amortised O(1), not a pass per batch.
        self._resolve_at = max(_RESOLVE_MIN, 2 * self._pending_count)
        self._resolve_logs_at = max(_RESOLVE_MIN, 2 * self._pending_log_count)

    def _resolve_children(self) -> None:
        """Counts waiting children on the parents seen since; drops those waited too long."""
        if not self._pending:
            return
        p = _Pending.joined(self._pending)
        self._pending = []
        self._pending_count = 0
        newest = self.newest_ns // self.window_ns
        parent, parent_s = self._index.lookup(p.parent, newest, p.since)
        found = parent[:, 0] >= 0
        duration = (p.end_ns[found] - p.start_ns[found]) / 1e9
        gap = parent_s[found] - duration
        # at most the parent's own duration: a child can outlast its parent where the hosts'
        # clocks disagree (or the client gave up), and no parent spends less than no time itself
        covered = np.minimum(covered_credit(p.parent[found], p.start_ns[found], p.end_ns[found]), parent_s[found])
        self._attribute(parent[found], p.nodeop[found], duration, covered, p.error[found], gap)
        keep = ~found & self.wait.waiting(p.window, p.entered, newest, self._spans)
        self._orphaned += int((~found & ~keep).sum())
        if keep.any():
            self._pending_count = int(keep.sum())
            self._pending.append(p.select(keep))

    def _count_urgency(self) -> None:
        """Queue times with no urgency of their own (vLLM records none) count as urgent or ordinary
        once a span of their trace marks the request so, in retained windows."""
        newest = self.newest_ns // self.window_ns
        q = self._urgency.resolve(newest, self._spans)
        kept = q.window > newest - self.retention_windows
        column = np.where(q.urgent[kept], Signal.QUEUE_TIME_URGENT, Signal.QUEUE_TIME_ORDINARY)
        key = signal_key(q.node[kept], column)
        count_values(self.windows, q.window[kept], key, q.queue_s[kept])

    def _attribute(
        self,
        parent: npt.NDArray[np.int64],
        child: npt.NDArray[np.int64],
        duration: npt.NDArray[np.float64],
        covered: npt.NDArray[np.float64],
        error: npt.NDArray[np.bool_],
        gap: npt.NDArray[np.float64],
    ) -> None:
        """Counts resolved children on their parents: `covered` (the share of the parent's time
        each adds to its children's union) against the parent's own time, every child on its edge
        (and whether its parent failed: call structure reads successful requests), with `gap`, the
        parent's duration less the child's (`EdgeSum.GAP`, `EdgeSum.GAVE_UP` where negative)."""
        if child.shape[0] == 0:
            return
        self._resolved += child.shape[0]
        parent_nodeop, parent_peer, window, parent_failed = parent[:, 0], parent[:, 1], parent[:, 2], parent[:, 3] == 1
        sums = np.zeros((child.shape[0], len(OpSum)))
        sums[:, OpSum.CHILD_DURATION] = covered
        for aggregate, index in by_window(self.windows, window):
            aggregate.ops.add(parent_nodeop, sums, None, index)
        # Every child counts on its parent operation's edge, local ones too: together they are the
        # operation's call structure. Only remote ones make graph edges (`graphview`).
        gave_up = parent_failed & ~error & (gap < 0)
        count_edges(
            self.windows,
            window,
            parent_nodeop,
            child,
            duration,
            error,
            gap=np.maximum(gap, 0.0),
            caller_failed=parent_failed,
            gave_up=gave_up,
        )
        node_of = self.names.nodeop_node
        remote = node_of[parent_nodeop] != node_of[child]
        paired = remote & (parent_peer >= 0)
        if paired.any():
            sums = np.zeros((int(paired.sum()), len(EdgeSum)))
            sums[:, EdgeSum.PAIRED] = 1.0
            keys = pair_key(parent_nodeop[paired], parent_peer[paired])
            for aggregate, index in by_window(self.windows, window[paired]):
                aggregate.edges.add(keys, sums, None, index)

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


__all__ = ["IngestCounts", "ServiceGraph"]
