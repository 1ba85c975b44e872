"""Peer methods the benchmark sets beside rca, on the same graph of the same case.

- `threshold`: a rule engine as SREs write them: a node is suspect when its p95 latency grew
  by half or its error rate by five points against the previous window; suspects deepest in the
  call graph first, then by how far over the threshold.
- `pagerank`: MicroRank-style personalised PageRank on the call graph with edges turned
  callee → caller... walked backwards from the alerting nodes, personalised by each node's
  latency and error anomaly, so the walk settles where anomalies are and lead.
Both read the same `rca.graph.view` windows: the onset-free baseline is the lookback's first
half, the observed part its second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import networkx as nx

from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between


def _halves(graph: ServiceGraph, start_ns: int, end_ns: int) -> tuple[nx.DiGraph, nx.DiGraph]:
    middle = (start_ns + end_ns) // 2
    return graph_between(graph, Window(start_ns, middle)), graph_between(graph, Window(middle, end_ns))


def _anomaly(before: nx.DiGraph, after: nx.DiGraph, node: str) -> tuple[float, float]:
    """(latency ratio of p95, error-rate rise) of a node, after against before."""
    a = after.nodes[node]
    b = before.nodes[node] if node in before else {}
    p95_a, p95_b = a.get("latency_p95_s", math.nan), b.get("latency_p95_s", math.nan)
    ratio = p95_a / p95_b if math.isfinite(p95_a) and math.isfinite(p95_b) and p95_b > 0 else 1.0
    return ratio, float(a.get("error_rate", 0.0)) - float(b.get("error_rate", 0.0))


def _candidates(after: nx.DiGraph, alert_nodes: Sequence[str]) -> list[str]:
    roots = [n for n in alert_nodes if n in after] or list(after.nodes)
    seen = set(roots)
    for root in roots:
        seen |= nx.descendants(after, root)
    return sorted(seen)


def threshold_ranking(graph: ServiceGraph, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> list[str]:
    before, after = _halves(graph, start_ns, end_ns)
    candidates = _candidates(after, alert_nodes)
    scored = []
    for node in candidates:
        ratio, rise = _anomaly(before, after, node)
        excess = max(ratio / 1.5, rise / 0.05)
        depth = len(nx.descendants(after, node))
        scored.append((excess < 1.0, depth, -excess, node))
    return [node for *_, node in sorted(scored)]


def pagerank_ranking(graph: ServiceGraph, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> list[str]:
    before, after = _halves(graph, start_ns, end_ns)
    candidates = _candidates(after, alert_nodes)
    if not candidates:
        return []
    sub = after.subgraph(candidates)
    anomaly = {}
    for node in candidates:
        ratio, rise = _anomaly(before, after, node)
        anomaly[node] = max(ratio - 1.0, 0.0) + max(rise, 0.0) * 10 + 1e-6
    walk = nx.DiGraph(sub)  # a walker follows calls downstream and jumps back to anomalous nodes
    for node in candidates:
        walk.add_edge(node, node)
    ranks = nx.pagerank(walk, alpha=0.85, personalization=anomaly)
    return sorted(candidates, key=lambda n: -ranks[n] * anomaly[n])
