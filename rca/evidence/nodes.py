"""Per-node evidence of an incident window against its baseline, one score per fault class and
one for a rank's wait in its collectives (`WAIT`).

Rows are a node's series split at their own change point and scored as one-sided shifts: the span
rows of latency, errors and call structure (`rca.evidence.spanrows`), the LLM-serving span signals
(`rca.evidence.llm`), the log rows (`rca.evidence.logs`) and the mapped metrics' rows
(`rca.evidence.metrics`). A node's score for a class is its strongest row, less the expected
maximum of that many null statistics, gated by the thresholds docs/interface.md states.
Unmeasurable classes are NaN, but an engine's GPU without a KV-cache reading of its own reads its
engine's (vLLM reports one KV cache per engine).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.evidence.llm import communicators, engine_gpus, llm_rows, request_timers
from rca.evidence.logs import log_rows
from rca.evidence.metrics import metric_rows
from rca.evidence.rows import MAX_SCORE, Rows, find_sorted, merge_rows
from rca.evidence.spanrows import MIN_BASELINE_WINDOWS, SpanExtractor
from rca.graph.accumulators import EdgeSum
from rca.graph.keys import high, low, pair_key
from rca.graph.names import NodeKind
from rca.graph.series import SeriesCache, window_series
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.faults import Fault
from rca.telemetry.metrics import GPU_PREFIX, HOST_PREFIX

FAULTS: tuple[Fault, ...] = tuple(Fault)
N_FAULTS = len(FAULTS)
F = {fault: i for i, fault in enumerate(FAULTS)}
# The evidence's columns: one per fault class (`F`), then a rank's wait in its collectives
# (`rca.evidence.llm.LlmRows.wait`), which no class is of: a lockstep peer's fault shows there.
WAIT = N_FAULTS
N_COLUMNS = N_FAULTS + 1
NETWORK_SUFFIX = " (network)"
NETWORK_MIN_SCORE = 2.0  # network nodes shifted less (two standard errors) are left out
Array = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class NodeEvidence:
    """Evidence of the nodes seen in a window: `(nodes, columns)` arrays (`N_COLUMNS`: a column per
    fault class, then `WAIT`), NaN where unmeasurable."""

    nodes: tuple[str, ...]
    services: tuple[str, ...]
    owner: Index  # row of the service owning each node (itself for services)
    virtual: npt.NDArray[np.bool_]  # uninstrumented callees, known only from their callers' spans
    network: npt.NDArray[np.bool_]  # a callee's network: its callers' client-call self time (reported as the callee)
    score: Array
    observed: Array
    baseline: Array
    onset_ns: Index
    signal: tuple[tuple[str, ...], ...]  # per node, per column: what was measured
    edges: Index  # (E, 2) caller → callee row indices into `nodes`
    communicator: Index  # NCCL ranks (`rca.evidence.llm.communicators`): communicator from 0; -1 elsewhere
    lockstep: Index  # the GPUs of one engine (`rca.evidence.llm.engine_gpus`): group from 0; -1 elsewhere
    engine: npt.NDArray[np.bool_]  # nodes timing whole LLM requests (`rca.evidence.llm.request_timers`)

    def index(self, node: str) -> int:
        return self.nodes.index(node)


def _max_expected(rows_per_node: Array) -> Array:
    """Expected maximum of that many null |statistics|: the multiple-testing allowance."""
    return np.sqrt(2.0 * np.log(np.maximum(rows_per_node, 1.0)))


def _column_rows(x: SpanExtractor) -> dict[int, tuple[Rows, bool]]:
    """Rows per evidence column (a fault class's, or `WAIT`), and whether the column gets the
    multiple-testing allowance."""
    llm = llm_rows(x)
    latency, errors = x.latency_and_errors(llm.latency)
    logs = log_rows(x, x.series.logs, x.series.log_ops, x.names.nodes.__getitem__, x.templates)
    rows = {
        F[Fault.LATENCY]: (latency, True),
        F[Fault.ERRORS]: (merge_rows(errors, logs.errors), True),
        F[Fault.CALL_STRUCTURE]: (merge_rows(x.call_structure(), logs.call_structure), True),
        **{F[fault]: (rows, False) for fault, rows in llm.classes.items()},
        WAIT: (llm.wait, False),
    }
    for fault, more in metric_rows(x, x.measures.table, x.measures.measures).items():
        r, allowance = rows[F[fault]]
        rows[F[fault]] = (merge_rows(r, more), allowance)
    return rows


def extract_evidence(
    graph: ServiceGraph,
    *,
    start_ns: int,
    end_ns: int,
    history_ns: int = 0,
    cache: SeriesCache | None = None,
    network_min_score: float = NETWORK_MIN_SCORE,
) -> NodeEvidence:
    """Evidence over the incident window [start_ns, end_ns): change points lie inside it, the
    baseline may reach `history_ns` further back where the graph still holds windows; `cache`
    lets the window series reuse what it stacked last time (`rca.graph.series.SeriesCache`). Network
    nodes whose rows all score below `network_min_score` are left out (0 keeps every one, as
    fitting needs: the quiet ones are most of what tells how often a network node is affected)."""
    series = window_series(graph, start_ns - history_ns, start_ns, end_ns, cache)
    first = 1 if series.history else MIN_BASELINE_WINDOWS
    x = SpanExtractor(graph, series, first)
    rows = _column_rows(x)
    base = x.network_base
    # A network node without a shift beyond its noise would only add a candidate (at a cost
    # quadratic in candidates): most callees' networks are quiet, and are left out.
    loud = np.unique(
        np.concatenate(
            [r.node[(r.node >= base) & (np.nan_to_num(r.score) >= network_min_score)] for r, _ in rows.values()]
        )
    )
    pairs = _edge_pairs(x)
    pairs = pairs[(pairs[:, 1] < base) | np.isin(pairs[:, 1], loud)]
    nodes = [r.node[r.node < base] for r, _ in rows.values()]
    pairs = np.concatenate([pairs, _ownership_pairs(graph, np.unique(np.concatenate(nodes)), pairs)])
    present = np.unique(np.concatenate([*nodes, loud, pairs.reshape(-1)]))
    n = present.shape[0]
    score = np.full((n, N_COLUMNS), np.nan)
    observed, baseline = np.full((n, N_COLUMNS), np.nan), np.full((n, N_COLUMNS), np.nan)
    onset = np.full((n, N_COLUMNS), -1, np.int64)
    labels = np.full((n, N_COLUMNS), "", object)
    for j, (r, allowance) in rows.items():
        row_node, known = find_sorted(present, r.node)
        inside = np.flatnonzero(known)
        if inside.shape[0] == 0:
            continue
        row_node = row_node[inside]
        s = np.clip(np.nan_to_num(r.score[inside]), 0.0, MAX_SCORE)
        if allowance:
            counts = np.bincount(row_node, minlength=n).astype(np.float64)
            s = np.maximum(s - _max_expected(counts)[row_node], 0.0)
        order = np.lexsort((s, row_node))
        last = np.r_[row_node[order][1:] != row_node[order][:-1], True]
        chosen = order[last]
        best = inside[chosen]
        node_rows = row_node[chosen]
        score[node_rows, j] = s[chosen]
        observed[node_rows, j] = r.shift.observed[best]
        baseline[node_rows, j] = r.shift.baseline[best]
        onset[node_rows, j] = series.start_ns(r.shift.onset[best])
        labels[node_rows, j] = r.label_rows(best)
    names = graph.names
    network = present >= base
    graph_node = np.where(network, present - base, present)  # a network node's callee
    owners = np.asarray([names.owners[int(i)] for i in graph_node.tolist()], np.int64)
    owners[network] = graph_node[network]
    _hosts_of_one_service(owners, present, pairs, names.nodes)
    owner_row, known = find_sorted(present, owners)
    owner_row = np.where(known, owner_row, np.arange(n))
    lockstep = engine_gpus(graph.names, present)
    return NodeEvidence(
        nodes=tuple(
            names.nodes[i] + NETWORK_SUFFIX if net else names.nodes[i]
            for i, net in zip(graph_node.tolist(), network.tolist(), strict=True)
        ),
        services=tuple(names.nodes[int(i)] for i in owners.tolist()),
        owner=owner_row,
        virtual=~network & np.asarray([names.kinds[i] is NodeKind.VIRTUAL for i in graph_node.tolist()], np.bool_),
        network=network,
        score=score,
        observed=observed,
        baseline=baseline,
        onset_ns=onset,
        signal=tuple(map(tuple, labels.tolist())),
        edges=np.searchsorted(present, pairs).astype(np.int64).reshape(-1, 2),
        communicator=communicators(x, present, pairs),
        lockstep=lockstep,
        engine=request_timers(x, present),
    )


def _ownership_pairs(graph: ServiceGraph, measured: Index, pairs: Index) -> Index:
    """Owner → node pairs for the resource nodes among `measured` that no span links: a GPU seen
    only in metrics hangs under the service owning it, a host under the owners of its GPUs (a
    fault there reaches them as a callee's does its callers)."""
    names = graph.names
    linked = set(pairs[:, 1].tolist())
    unlinked = [n for n in measured.tolist() if n not in linked and names.kinds[n] is NodeKind.RESOURCE]
    out = [(names.owners[n], n) for n in unlinked if names.owners[n] != n and not _is_host(names.nodes[n])]
    hosts = {names.nodes[n].removeprefix(HOST_PREFIX): n for n in unlinked if _is_host(names.nodes[n])}
    if hosts:  # one pass over the GPUs: each names its host
        owners: dict[int, set[int]] = {n: set() for n in hosts.values()}
        for gpu, text in enumerate(names.nodes):
            host = hosts.get(text.removeprefix(GPU_PREFIX).rpartition("/")[0]) if text.startswith(GPU_PREFIX) else None
            if host is not None and names.kinds[names.owners[gpu]] is NodeKind.SERVICE:
                owners[host].add(names.owners[gpu])
        out += [(owner, host) for host, found in owners.items() for owner in sorted(found)]
    return np.asarray(out, np.int64).reshape(-1, 2)


def _hosts_of_one_service(owners: Index, present: Index, pairs: Index, nodes: list[str]) -> None:
    """A host whose GPUs one service owns (`_ownership_pairs`) is that service's (in place): the
    processes its NUMA counters place are that service's, which an SRE would name."""
    for row in np.flatnonzero(owners == present).tolist():
        node = int(present[row])
        if node < len(nodes) and _is_host(nodes[node]):
            parents = np.unique(pairs[pairs[:, 1] == node, 0])
            if parents.shape[0] == 1:
                owners[row] = parents[0]


def _is_host(name: str) -> bool:
    return name.startswith(HOST_PREFIX)


def _edge_pairs(x: SpanExtractor) -> Index:
    edges = x.series.edges
    if edges.keys.shape[0] == 0:
        return np.zeros((0, 2), np.int64)
    s = edges.sums
    calls = (s[:, :, EdgeSum.CALLS] + s[:, :, EdgeSum.PEER_CALLS]).sum(axis=1)
    pairs = np.stack([x.node_of[high(edges.keys)], x.node_of[low(edges.keys)]], axis=1)[calls > 0]
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    wire = edges.keys[x.wire_edges]  # callers → the network nodes of their callees
    network = np.stack([x.node_of[high(wire)], x.network_base + x.node_of[low(wire)]], axis=1)
    pairs = np.concatenate([pairs, network])
    keys = np.unique(pair_key(pairs[:, 0], pairs[:, 1]))
    return np.stack([high(keys), low(keys)], axis=1)
