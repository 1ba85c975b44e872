"""Who calls whom in a time range of the service graph: enough to place alerts and measure how far
apart they are, read straight from the window tables (no statistics are built)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from rca.accumulators import EdgeSum
from rca.alerts import nodes_for
from rca.graph import NodeKind, ServiceGraph

UNCONNECTED = -1


@dataclass(frozen=True)
class Topology:
    """Caller → callee pairs seen in a range, plus every node the graph has ever named."""

    known: frozenset[str]
    traced: tuple[str, ...]  # nodes that report spans of their own (services)
    calls: nx.DiGraph = field(repr=False)  # nodes active in the range, edges caller → callee
    _reach: dict[tuple[str, ...], dict[str, int]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def roots(self) -> tuple[str, ...]:
        """Traced services with no caller in the range (where traces begin)."""
        return tuple(sorted(n for n in self.traced if n in self.calls and self.calls.in_degree(n) == 0))

    def nodes_for(self, service: str | None) -> tuple[str, ...]:
        return nodes_for(service, known=self.known, traced=self.traced, roots=self.roots)

    def hops(self, sources: Sequence[str], targets: Sequence[str]) -> int:
        """Fewest undirected hops between any source and any target; UNCONNECTED when no path."""
        if set(sources) & set(targets):
            return 0
        key = tuple(sorted(s for s in sources if s in self.calls))
        reach = self._reach.get(key)
        if reach is None:
            undirected = self.calls.to_undirected(as_view=True)
            reach = self._reach[key] = dict(nx.multi_source_dijkstra_path_length(undirected, key)) if key else {}
        found = [int(reach[t]) for t in targets if t in reach]
        return min(found) if found else UNCONNECTED


def topology_between(graph: ServiceGraph, start_ns: int, end_ns: int) -> Topology:
    """The topology of spans starting in [start_ns, end_ns) (parents resolved first)."""
    graph.resolve()
    names = graph.names
    first, last = start_ns // graph.window_ns, (end_ns - 1) // graph.window_ns
    windows = [aggregate for w, aggregate in graph.windows.items() if first <= w <= last]
    edge_keys = [
        k[(s[:, EdgeSum.CALLS] > 0) | (s[:, EdgeSum.PEER_CALLS] > 0)] for k, s, _ in (w.edges.view() for w in windows)
    ]
    calls = nx.DiGraph()
    if windows:
        active = np.unique(np.concatenate([w.ops.view()[0] for w in windows]))
        calls.add_nodes_from(names.nodes[n] for n in np.unique(names.nodeop_node[active]).tolist())
    if edge_keys:
        unique = np.unique(np.concatenate(edge_keys))
        callers = names.nodeop_node[unique >> 32]
        callees = names.nodeop_node[unique & 0xFFFFFFFF]
        pairs = {(int(a), int(b)) for a, b in zip(callers.tolist(), callees.tolist(), strict=True) if a != b}
        calls.add_edges_from((names.nodes[a], names.nodes[b]) for a, b in pairs)
    traced = tuple(n for n, kind in zip(names.nodes, names.kinds, strict=True) if kind is NodeKind.SERVICE)
    return Topology(frozenset(names.nodes), traced, calls)
