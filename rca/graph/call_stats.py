"""Call statistics aggregated outside rca (a Collector's `servicegraph` connector, Tempo's
metrics-generator, span metrics) and how they enter the graph as if rca had seen the spans.

A row is one window and one client → server pair: calls, failed calls and the seconds the server
and the client spent on them. It counts as span-derived rows do (`ServiceGraph.add`): the server's
requests on its node (operation `NO_OP`); on the client, a client operation `call:{server}` (its
calls, taking the client seconds, their child the server seconds) below the client's own requests
(which spend the client seconds in children); the client operation → server edge carries the
client's wait less the server's time (`EdgeSum.GAP`: time on the wire, as for a client span's one
child). A row without a client holds a node's own requests only (span metrics). Rows naming a node
that spans reached rca for are left out: spans say it better, and counting both would count twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.graph.accumulators import EdgeSum, KeyedTable, OpSum
from rca.graph.histogram import buckets
from rca.graph.keys import pair_key
from rca.graph.names import NO_OP, NodeKind
from rca.graph.service_graph import ServiceGraph
from rca.graph.windows import by_window, evict

CLIENT_OP_PREFIX = "call:"
Index = npt.NDArray[np.int64]
Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class CallStats:
    """Columnar call statistics: `client` and `server` index `strings` (`client` -1: none named)."""

    window_ns: npt.NDArray[np.int64]  # start of the row's window (event time)
    client: npt.NDArray[np.int32]
    server: npt.NDArray[np.int32]
    calls: Array
    failed: Array
    server_seconds: Array  # summed over the calls
    client_seconds: Array
    strings: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.window_ns.shape[0])

    def select(self, mask: npt.NDArray[np.bool_]) -> CallStats:
        return CallStats(
            self.window_ns[mask],
            self.client[mask],
            self.server[mask],
            self.calls[mask],
            self.failed[mask],
            self.server_seconds[mask],
            self.client_seconds[mask],
            self.strings,
        )


def _add(table: KeyedTable, keys: Index, sums: Array, calls: Array, seconds: Array) -> None:
    """Adds `sums` by key, and each row's calls to the histogram bucket of its mean duration."""
    table.add(keys, sums, None)
    counts = np.rint(calls).astype(np.int32)
    has = counts > 0
    if has.any():
        mean = seconds[has] / np.maximum(calls[has], 1e-12)
        np.add.at(table.hist, (table.rows(keys[has]), buckets(mean)), counts[has])


def count_call_stats(graph: ServiceGraph, stats: CallStats) -> None:
    """Adds `stats` to `graph` (`ServiceGraph.add_call_stats`)."""
    if len(stats) == 0:
        return
    names = graph.names
    known = [names.node_ids.get(s) for s in stats.strings]
    traced = np.asarray([i is not None and i in graph.span_nodes for i in known] + [False], np.bool_)
    keep = ~traced[stats.server] & ~traced[stats.client]  # index -1 reads the last entry: False
    graph.newest_ns = max(graph.newest_ns, int(stats.window_ns[keep].max(initial=0)))
    oldest_kept = graph.newest_ns // graph.window_ns - graph.retention_windows + 1
    window = stats.window_ns // graph.window_ns
    stats, window = stats.select(keep & (window >= oldest_kept)), window[keep & (window >= oldest_kept)]
    if len(stats):
        node = np.full(len(stats.strings) + 1, -1, np.int64)
        for s in np.unique(np.concatenate([stats.server, stats.client[stats.client >= 0]])).tolist():
            node[s] = names.node(stats.strings[s], NodeKind.SERVICE)
        _count(graph, stats, window, node)
    evict(graph.windows, oldest_kept)


def _failure_share(stats: CallStats, window: Index, node: Index, paired: Index) -> Array:
    """Per row in `paired`, the share of its client's own requests (rows where it is the server)
    that failed in the row's window; 0 where the client serves none."""
    span = int(node.max()) + 2
    served = window * span + node[stats.server]
    keys, at = np.unique(served, return_inverse=True)
    share = np.bincount(at, stats.failed) / np.maximum(np.bincount(at, stats.calls), 1e-12)
    calling = window[paired] * span + node[stats.client[paired]]
    row = np.minimum(np.searchsorted(keys, calling), keys.shape[0] - 1)
    result: Array = np.where(keys[row] == calling, share[row], 0.0)
    return result


def _count(graph: ServiceGraph, stats: CallStats, window: Index, node: Index) -> None:
    names = graph.names
    no_op = names.op(NO_OP)
    server = names.nodeops(node[stats.server], np.full(len(stats), no_op, np.int64))
    n, calls, failed = len(stats), stats.calls, stats.failed
    server_s, client_s = stats.server_seconds, stats.client_seconds
    op_sums = np.zeros((n, len(OpSum)))
    op_sums[:, OpSum.CALLS], op_sums[:, OpSum.ERRORS], op_sums[:, OpSum.DURATION] = calls, failed, server_s
    paired = np.flatnonzero(stats.client >= 0)
    client = call = np.zeros(0, np.int64)
    if paired.shape[0]:
        client_node = node[stats.client[paired]]
        op = np.full(len(stats.strings), -1, np.int64)
        for s in np.unique(stats.server[paired]).tolist():
            op[s] = names.op(f"{CLIENT_OP_PREFIX}{stats.strings[s]}")
        client = names.nodeops(client_node, np.full(paired.shape[0], no_op, np.int64))
        call = names.nodeops(client_node, op[stats.server[paired]])
    own = np.zeros((paired.shape[0], len(OpSum)))  # the client's requests: children's time
    own[:, OpSum.CHILD_DURATION] = client_s[paired]
    calling = np.zeros((paired.shape[0], len(OpSum)))  # the client operation
    calling[:, OpSum.CALLS], calling[:, OpSum.ERRORS] = calls[paired], failed[paired]
    calling[:, OpSum.DURATION], calling[:, OpSum.CHILD_DURATION] = client_s[paired], server_s[paired]
    local = np.zeros((paired.shape[0], len(EdgeSum)))  # requests → client operation
    local[:, EdgeSum.CALLS], local[:, EdgeSum.ERRORS] = calls[paired], failed[paired]
    local[:, EdgeSum.DURATION] = client_s[paired]
    # which requests made the calls is not said: those of failed requests in their failure share
    local[:, EdgeSum.FAILED_CALLER] = calls[paired] * _failure_share(stats, window, node, paired)
    remote = local.copy()  # client operation → server: a failed call is its operation's failure
    remote[:, EdgeSum.DURATION] = server_s[paired]
    remote[:, EdgeSum.GAP] = client_s[paired] - server_s[paired]
    remote[:, EdgeSum.FAILED_CALLER] = failed[paired]
    for aggregate, rows in by_window(graph.windows, window):
        _add(aggregate.ops, server[rows], op_sums[rows], calls[rows], server_s[rows])
    for aggregate, rows in by_window(graph.windows, window[paired]):
        p = paired[rows]
        _add(aggregate.ops, client[rows], own[rows], np.zeros(rows.shape[0]), client_s[p])
        _add(aggregate.ops, call[rows], calling[rows], calls[p], client_s[p])
        _add(aggregate.edges, pair_key(client[rows], call[rows]), local[rows], calls[p], client_s[p])
        _add(aggregate.edges, pair_key(call[rows], server[p]), remote[rows], calls[p], server_s[p])
