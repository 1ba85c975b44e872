"""A layered drawing of a call graph: callers above callees, computed server-side.

Layers are the topological generations of the graph's condensation (a cycle's nodes share a
layer); within a layer nodes are ordered by the mean position of their callers (barycentre), and a
layer wider than `per_row` wraps onto further rows, so 50+ nodes stay legible.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx


@dataclass(frozen=True, slots=True)
class Box:
    """A node's rectangle (top-left corner and size)."""

    x: float
    y: float
    width: float
    height: float

    @property
    def top(self) -> tuple[float, float]:
        return self.x + self.width / 2, self.y

    @property
    def bottom(self) -> tuple[float, float]:
        return self.x + self.width / 2, self.y + self.height


@dataclass(frozen=True, slots=True)
class Layout:
    boxes: dict[str, Box]
    width: float
    height: float
    layers: int


def layers_of(graph: nx.DiGraph) -> list[list[str]]:
    """Nodes by layer, callers first: the generations of the graph of strongly connected components."""
    condensed = nx.condensation(graph)
    members = condensed.graph["mapping"]
    layer_of_component = {c: i for i, gen in enumerate(nx.topological_generations(condensed)) for c in gen}
    layers: list[list[str]] = [[] for _ in range(len(set(layer_of_component.values())))]
    for node in graph.nodes:
        layers[layer_of_component[members[node]]].append(node)
    return layers


def _ordered(layer: list[str], graph: nx.DiGraph, placed: dict[str, float]) -> list[str]:
    """Barycentre order: by the mean x of the node's already placed callers (ties by name)."""

    def key(node: str) -> tuple[float, str]:
        xs = [placed[p] for p in graph.predecessors(node) if p in placed]
        return (sum(xs) / len(xs) if xs else float("inf"), node)

    return sorted(layer, key=key)


def layered_layout(
    graph: nx.DiGraph,
    *,
    per_row: int = 8,
    node_width: float = 150.0,
    node_height: float = 44.0,
    gap_x: float = 18.0,
    gap_y: float = 56.0,
    margin: float = 16.0,
) -> Layout:
    """Boxes for every node, rows centred, one layer after another from the top."""
    layers = layers_of(graph)
    widest = min(per_row, max((len(layer) for layer in layers), default=1))
    width = 2 * margin + widest * node_width + (widest - 1) * gap_x
    boxes: dict[str, Box] = {}
    centres: dict[str, float] = {}
    y = margin
    for layer in layers:
        ordered = _ordered(layer, graph, centres)
        for start in range(0, len(ordered), per_row):
            row = ordered[start : start + per_row]
            row_width = len(row) * node_width + (len(row) - 1) * gap_x
            x = (width - row_width) / 2
            for node in row:
                boxes[node] = Box(x, y, node_width, node_height)
                centres[node] = x + node_width / 2
                x += node_width + gap_x
            y += node_height + gap_y
    return Layout(boxes, width, max(y - gap_y + margin, 2 * margin), len(layers))
