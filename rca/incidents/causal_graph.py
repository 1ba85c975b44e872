"""An incident's causal graph: the window's service graph around its ranked candidates.

The graph holds every candidate of the ranking and the nodes that call them, with the window's
statistics (`rca.graph.view`); causes and path edges the window no longer holds (after a restart, or
beyond retention) are added bare, so the causal path is always drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import networkx as nx

from rca.incidents.model import IncidentCauses


@dataclass(frozen=True, slots=True)
class IncidentGraph:
    """The causes of an incident, its alerting nodes and its causal graph over the ranking window."""

    causes: IncidentCauses
    alert_nodes: tuple[str, ...]
    graph: nx.DiGraph

    @property
    def seconds(self) -> float:
        return max(self.causes.end_ns - self.causes.start_ns, 1) / 1e9

    def posterior(self) -> dict[str, float]:
        """Each candidate's posterior probability of being the root cause."""
        ranking = self.causes.ranking
        return {c.node: c.probability for c in ranking.causes} if ranking else {}

    def path_edges(self) -> frozenset[tuple[str, str]]:
        """The top cause's path as caller → callee edges (the path runs callee → caller)."""
        path = self.top_path()
        return frozenset((caller, callee) for callee, caller in pairwise(path))

    def top_path(self) -> tuple[str, ...]:
        ranking = self.causes.ranking
        return ranking.causes[0].path if ranking and ranking.causes else ()


def causal_subgraph(
    window: nx.DiGraph, causes: IncidentCauses, alert_nodes: tuple[str, ...], max_nodes: int | None = None
) -> nx.DiGraph:
    """The candidates, their callers, the alerting nodes and the top cause's path, out of `window`
    (most probable first when `max_nodes` cuts the graph down: the top path and alerts always stay)."""
    ranking = causes.ranking
    ranked = [c.node for c in ranking.causes] if ranking else []
    top_path = list(ranking.causes[0].path) if ranking and ranking.causes else []
    keep = dict.fromkeys([*top_path, *alert_nodes])
    for node in ranked:
        if max_nodes is not None and len(keep) >= max_nodes:
            break
        keep[node] = None
        callers = window.predecessors(node) if node in window else ()
        for caller in callers:
            if max_nodes is None or len(keep) < max_nodes:
                keep[caller] = None
    graph = nx.DiGraph(window.subgraph([n for n in keep if n in window]))
    graph.add_nodes_from(n for n in keep if n not in graph)
    graph.add_edges_from(
        (caller, callee) for callee, caller in pairwise(top_path) if not graph.has_edge(caller, callee)
    )
    return graph
