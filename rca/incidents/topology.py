"""Who calls whom in a time range of the service graph: enough to place alerts and measure how far
apart they are, read straight from the window tables (no statistics are built)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from rca.graph.accumulators import EdgeSum
from rca.graph.keys import high, low
from rca.graph.names import NodeKind
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.alerts import nodes_for

UNCONNECTED = -1


@dataclass(frozen=True)
class CallTopology:
    """Who called whom in a range: undirected links between the nodes active in it (their spans,
    or their log records: a service that only logs is a node too). Alerts are placed on these
    nodes only: a name the graph knew once but that is silent in the range would give a ranking
    with no evidence, so it is placed like any untraced name."""

    known: frozenset[str]  # the nodes active in the range
    traced: tuple[str, ...]  # those that report spans of their own (services)
    links: nx.Graph = field(repr=False)  # the nodes active in the range, linked where one called the other
    roots: tuple[str, ...]  # traced services active in the range with no caller there (where traces begin)
    _reach: dict[tuple[str, ...], dict[str, int]] = field(default_factory=dict, repr=False, compare=False)

    def nodes_for(self, service: str | None) -> tuple[str, ...]:
        return nodes_for(service, known=self.known, traced=self.traced, roots=self.roots)

    def hops(self, sources: Sequence[str], targets: Sequence[str]) -> int:
        """Fewest undirected hops between any source and any target; UNCONNECTED when no path."""
        if set(sources) & set(targets):
            return 0
        key = tuple(sorted(s for s in sources if s in self.links))
        reach = self._reach.get(key)
        if reach is None:
            reach = self._reach[key] = {}
            for source in key:  # breadth-first from each source, keeping the nearest
                for node, hops in nx.single_source_shortest_path_length(self.links, source).items():
                    reach[node] = min(hops, reach.get(node, hops))
        found = [int(reach[t]) for t in targets if t in reach]
        return min(found) if found else UNCONNECTED


def topology_between(graph: ServiceGraph, start_ns: int, end_ns: int) -> CallTopology:
    """The topology of spans starting in [start_ns, end_ns) (parents resolved first), with the
    nodes that wrote log records in it."""
    graph.resolve()
    names = graph.names
    first, last = start_ns // graph.window_ns, (end_ns - 1) // graph.window_ns
    windows = [aggregate for w, aggregate in graph.windows.items() if first <= w <= last]
    links = nx.Graph()
    pairs: set[tuple[int, int]] = set()
    spanned: frozenset[str] = frozenset()
    if windows:
        node_of = names.nodeop_node
        active = np.unique(np.concatenate([w.ops.view()[0] for w in windows]))
        links.add_nodes_from(names.nodes[n] for n in np.unique(node_of[active]).tolist())
        edge_keys = []
        for keys, sums, _ in (w.edges.view() for w in windows):
            edge_keys.append(keys[(sums[:, EdgeSum.CALLS] > 0) | (sums[:, EdgeSum.PEER_CALLS] > 0)])
        unique = np.unique(np.concatenate(edge_keys))
        callers = node_of[high(unique)].tolist()
        callees = node_of[low(unique)].tolist()
        pairs = {(a, b) for a, b in zip(callers, callees, strict=True) if a != b}
        links.add_edges_from((names.nodes[a], names.nodes[b]) for a, b in pairs)
        spanned = frozenset(links.nodes)
        logged = np.unique(np.concatenate([high(w.logs.view()[0]) for w in windows]))
        links.add_nodes_from(names.nodes[n] for n in logged.tolist())
    present = frozenset(links.nodes)
    traced = tuple(sorted(n for n in spanned if names.kinds[names.node_ids[n]] is NodeKind.SERVICE))
    called = {names.nodes[b] for _, b in pairs}
    roots = tuple(n for n in traced if n not in called)
    return CallTopology(present, traced, links, roots)
