"""A merged window of the service graph as a networkx DiGraph with readable statistics."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TypeVar

import networkx as nx
import numpy as np
import numpy.typing as npt

from rca.graph.accumulators import EdgeSum, LogSum, OpSum, SignalSum, WindowAggregate
from rca.graph.histogram import N_BUCKETS, quantile
from rca.graph.keys import high, low, signal_key, signal_node, signal_of
from rca.graph.names import Names
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.spans import Signal


@dataclass(frozen=True, slots=True)
class Window:
    start_ns: int
    end_ns: int


def _latency(hist: npt.NDArray[np.int64], calls: float, total_s: float) -> dict[str, float]:
    return {
        "latency_mean_s": total_s / calls if calls else float("nan"),
        "latency_p50_s": quantile(hist, 0.5),
        "latency_p95_s": quantile(hist, 0.95),
    }


def build_digraph(aggregate: WindowAggregate, names: Names) -> nx.DiGraph:
    """Nodes and edges with calls, errors, latency, self time, operations and signals."""
    graph = nx.DiGraph()
    node_of, op_of = names.nodeop_node, names.nodeop_op
    keys, sums, hist = aggregate.ops.view()
    nodes = node_of[keys]
    for node in np.unique(nodes).tolist():
        sel = nodes == node
        s = sums[sel].sum(axis=0)
        calls = float(s[OpSum.CALLS])
        self_s = max(0.0, float(s[OpSum.DURATION] - s[OpSum.CHILD_DURATION]))
        ops = {
            names.ops[int(op_of[k])]: {
                "calls": float(r[OpSum.CALLS]),
                "errors": float(r[OpSum.ERRORS]),
                "self_time_mean_s": max(0.0, float(r[OpSum.DURATION] - r[OpSum.CHILD_DURATION]))
                / max(float(r[OpSum.CALLS]), 1.0),
                **_latency(h, float(r[OpSum.CALLS]), float(r[OpSum.DURATION])),
            }
            for k, r, h in zip(keys[sel], sums[sel], hist[sel], strict=True)
        }
        graph.add_node(
            names.nodes[node],
            calls=calls,
            errors=float(s[OpSum.ERRORS]),
            error_rate=float(s[OpSum.ERRORS]) / calls if calls else 0.0,
            self_time_mean_s=self_s / calls if calls else 0.0,
            operations=ops,
            **_latency(hist[sel].sum(axis=0), calls, float(s[OpSum.DURATION])),
        )
    _add_edges(graph, aggregate, names)
    _add_signals(graph, aggregate, names)
    _add_logs(graph, aggregate, names)
    for name in list(graph.nodes):
        index = names.node_ids[name]
        graph.nodes[name]["kind"] = str(names.kinds[index])
        graph.nodes[name]["service"] = names.nodes[names.owners[index]]
        if "calls" not in graph.nodes[name]:  # a virtual callee: what its callers sent it
            graph.nodes[name]["calls"] = sum(d["calls"] for _, _, d in graph.in_edges(name, data=True))
    return graph


def _add_edges(graph: nx.DiGraph, aggregate: WindowAggregate, names: Names) -> None:
    keys, sums, hist = aggregate.edges.view()
    node_of = names.nodeop_node
    calls = sums[:, EdgeSum.CALLS]
    unpaired = np.maximum(sums[:, EdgeSum.PEER_CALLS] - sums[:, EdgeSum.PAIRED], 0.0)
    share = np.divide(
        unpaired, sums[:, EdgeSum.PEER_CALLS], out=np.zeros_like(unpaired), where=sums[:, EdgeSum.PEER_CALLS] > 0
    )
    edge_calls = calls + unpaired
    edge_errors = sums[:, EdgeSum.ERRORS] + sums[:, EdgeSum.PEER_ERRORS] * share
    edge_time = sums[:, EdgeSum.DURATION] + sums[:, EdgeSum.PEER_DURATION] * share
    totals: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    hists: dict[tuple[int, int], npt.NDArray[np.int64]] = defaultdict(lambda: np.zeros(N_BUCKETS, np.int64))
    callers, callees = node_of[high(keys)].tolist(), node_of[low(keys)].tolist()
    for i in range(keys.shape[0]):
        if edge_calls[i] <= 0:
            continue
        pair = (int(callers[i]), int(callees[i]))
        if pair[0] == pair[1]:  # a call inside one node: call structure, not a graph edge
            continue
        t = totals[pair]
        t[0] += edge_calls[i]
        t[1] += edge_errors[i]
        t[2] += edge_time[i]
        t[3] += unpaired[i]
        hists[pair] += hist[i]
    for (caller, callee), (n, errors, seconds, virtual_calls) in totals.items():
        graph.add_edge(
            names.nodes[caller],
            names.nodes[callee],
            calls=float(n),
            errors=float(errors),
            error_rate=float(errors / n),
            virtual=bool(virtual_calls >= n),
            **_latency(hists[(caller, callee)], float(n), float(seconds)),
        )


def _add_signals(graph: nx.DiGraph, aggregate: WindowAggregate, names: Names) -> None:
    """Each node's span signals, its instances' summed into it (`NodeKind.INSTANCE`)."""
    keys, sums, hist = aggregate.signals.view()
    keys = signal_key(names.signal_owners(signal_node(keys)), signal_of(keys))
    keys, group = np.unique(keys, return_inverse=True)
    sums, hist = _summed(group.reshape(-1), sums, keys.shape[0]), _summed(group.reshape(-1), hist, keys.shape[0])
    for node, signal, row, h in zip(signal_node(keys).tolist(), signal_of(keys).tolist(), sums, hist, strict=True):
        name = names.nodes[node]
        count = float(row[SignalSum.COUNT])
        mean = float(row[SignalSum.SUM]) / count
        variance = max(0.0, float(row[SignalSum.SUMSQ]) / count - mean * mean)
        if name not in graph:
            graph.add_node(name)
        signals = graph.nodes[name].setdefault("signals", {})
        signals[Signal(signal).name.lower()] = {
            "count": count,
            "mean": mean,
            "std": variance**0.5,
            "p95": quantile(h, 0.95),
        }


Summed = TypeVar("Summed", bound=np.generic)


def _summed(group: npt.NDArray[np.int64], rows: npt.NDArray[Summed], n: int) -> npt.NDArray[Summed]:
    """`rows` summed by their row in the result, `group`."""
    out = np.zeros((n, *rows.shape[1:]), rows.dtype)
    np.add.at(out, group, rows)
    return out


def _add_logs(graph: nx.DiGraph, aggregate: WindowAggregate, names: Names) -> None:
    """Each node's log records and error records: a service that only logs is a node too."""
    keys, sums, _ = aggregate.logs.view()
    node = high(keys)
    for n in np.unique(node).tolist():
        total = sums[node == n].sum(axis=0)
        name = names.nodes[n]
        if name not in graph:
            graph.add_node(name)
        graph.nodes[name].update(log_records=float(total[LogSum.RECORDS]), log_errors=float(total[LogSum.ERRORS]))


def graph_between(graph: ServiceGraph, window: Window) -> nx.DiGraph:
    """The graph of spans starting in [start, end)."""
    return build_digraph(graph.aggregate(window.start_ns, window.end_ns), graph.names)


def default_window(graph: ServiceGraph, minutes: float = 15.0) -> Window:
    """The `minutes` up to the newest span seen (event time)."""
    end = graph.newest_ns + 1
    return Window(end - int(minutes * 60e9), end)
