"""LLM-serving evidence (docs/interface.md): the rows each signal adds, and the classes they point to.

Where signals sit: queue, scheduler and token timings on the engine (the node of the spans that
carry them); DRAM, L2 and KV-cache signals, and GPU time, on the GPU node `gpu:{host}/{id}`;
NCCL signals on the rank (the service of the `nccl:` spans); NUMA signals where their spans ran.
A service's own signals are read per instance (`rca.graph.names.span_signal_nodes`: engine replicas
may share one service name) and each row is reported on the service: its score is its strongest
instance's, not the replicas' blend.

Lockstep: a compute span's self time excludes the time its sibling collectives overlapped it
(`OpSum.WAIT`, from `rca.graph.lockstep`) and `nccl:` operations are no latency rows, so a straggler
rank shows compute up and collective wait flat, and its peers the reverse. A rank's time in
collectives and its NCCL bandwidth (bytes per second in them) rise and fall with waiting for a
peer: they are the `wait` rows (`rca.evidence.nodes.WAIT`), which the health model reads as what a
lockstep root drives in its peers; a rank's own NCCL trouble is its point-to-point latency and a
collective no longer overlapping its compute. Timings are per token where tokens are known, as
ratios of window sums: the engine's by its own requests' tokens, a GPU's by the output tokens of
the engines calling its rank (of the replica in its own pod, where one is known), so load and
request mix do not read as faults. Every row is a change point against the node's own baseline;
only the thresholds docs/interface.md states gate a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from rca.evidence.changepoint import Shift
from rca.evidence.rows import (
    MAX_SCORE,
    Array,
    Index,
    Labels,
    Rows,
    find_sorted,
    merge_rows,
    per_window_mean,
    sum_rows,
)
from rca.graph.accumulators import OpSum, SignalSum
from rca.graph.keys import high, low, pair_key, signal_node, signal_of
from rca.graph.names import Names, NodeKind
from rca.graph.series import Table, WindowSeries
from rca.telemetry.faults import Fault
from rca.telemetry.metrics import GPU_PREFIX
from rca.telemetry.spans import Signal

Part = tuple[Index, Array, Array, Labels]  # node, per-window value, weight, what it measured
RELATIVE_FLOOR = 0.02  # a signal's noise is at least 2% of its level
QUEUE_RESOLUTION_S = 1e-3  # queue waits differing by less are alike (the inversion gate's scale)
LLM_CLASSES = (
    Fault.GPU_MEMORY_BANDWIDTH,
    Fault.KV_CACHE_FRAGMENTATION,
    Fault.SCHEDULER_PRIORITY_INVERSION,
    Fault.NCCL_COMMUNICATION,
    Fault.NUMA_MISMATCH,
)
PER_TOKEN = (  # engine timings, each over the tokens it processes
    (Signal.TIME_TO_FIRST_TOKEN, Signal.INPUT_TOKENS, "ttft_per_input_token_s"),
    (Signal.PREFILL_TIME, Signal.INPUT_TOKENS, "prefill_per_input_token_s"),
    (Signal.DECODE_TIME, Signal.OUTPUT_TOKENS, "decode_per_output_token_s"),
    (Signal.E2E_LATENCY, Signal.OUTPUT_TOKENS, "e2e_per_output_token_s"),
)


class LlmExtractor(Protocol):
    """What the LLM rows need of the evidence extractor."""

    names: Names
    series: WindowSeries
    node_of: Index  # node of each node-operation id
    op_of: Index  # operation of each node-operation id

    def rows(self, parts: list[Part], direction: int, floor: Array | float, log_values: bool = False) -> Rows: ...


@dataclass(frozen=True, slots=True)
class LlmRows:
    """Latency parts (log seconds, scored with the latency class's own rows) and the rows of
    the LLM-serving classes."""

    latency: list[Part]
    classes: dict[Fault, Rows]
    wait: Rows  # ranks' time in collectives and NCCL bandwidth: what a lockstep peer's fault shows


def _share(level: Array, healthy: float, faulty: float) -> Array:
    """Where `level` sits between the interface's `healthy` level (0) and its `faulty` one (1)."""
    return np.clip((level - healthy) / (faulty - healthy), 0.0, 1.0)


def gate(rows: Rows, healthy: float, faulty: float) -> None:
    """Scales scores by `_share` of the observed level."""
    rows.score = np.maximum(rows.score, 0.0) * _share(rows.shift.observed, healthy, faulty)


def _as_far_as_lost(rows: Rows) -> None:
    """Scales (capped) scores by the share of its baseline level a row lost. A rank whose
    collective no longer overlaps its compute (interface: NCCL) loses all its overlap; its peers,
    whose collectives now wait for it past their own compute, keep theirs (`rca.graph.lockstep`)."""
    lost = 1.0 - rows.shift.observed / np.maximum(rows.shift.baseline, 1e-9)
    rows.score = np.minimum(np.maximum(rows.score, 0.0), MAX_SCORE) * np.clip(lost, 0.0, 1.0)


def _towards(rows: Rows, direction: int) -> Rows:
    """`rows` scored positive for a shift in `direction` (a fall scores as positive for -1)."""
    rows.score = rows.score * direction
    return rows


def _by_signal(table: Table, signal: Signal) -> tuple[Index, Array]:
    """Nodes (ascending) with rows of `signal`, and their sums (nodes, windows, SignalSum)."""
    mine = signal_of(table.keys) == int(signal)
    return signal_node(table.keys[mine]), table.sums[mine]


def _log_ratio(numerator: Array, denominator: Array) -> Array:
    """log(numerator / denominator), NaN where either is not positive (no observation)."""
    ok = (numerator > 0) & (denominator > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, np.log(np.where(ok, numerator, 1.0) / np.where(ok, denominator, 1.0)), np.nan)


def _label(prefix: str, n: int) -> Labels:
    return Labels(prefix, np.full(n, -1, np.int64))


def _ratio_rows(x: LlmExtractor, parts: list[Part], direction: int) -> Rows:
    """Log-ratio rows, floored at `RELATIVE_FLOOR` of their level; levels back in natural units."""
    return _towards(x.rows(parts, direction, RELATIVE_FLOOR**2, log_values=True), direction)


def _within(sums: Array) -> tuple[Array, Array]:
    """Window means of (rows, windows, SignalSum) sums, and each row's variance within windows."""
    count = sums[:, :, SignalSum.COUNT]
    mean = per_window_mean(sums[:, :, SignalSum.SUM], count)
    scatter = np.nansum(sums[:, :, SignalSum.SUMSQ], axis=1) - np.nansum(mean * sums[:, :, SignalSum.SUM], axis=1)
    return mean, np.nan_to_num(scatter / np.maximum(count.sum(axis=1) - 1.0, 1.0))


def level_rows(x: LlmExtractor, nodes: Index, sums: Array, labels: Labels, direction: int) -> Rows:
    """Per row, the window means of observed levels (`sums`: rows, windows, SignalSum) scored
    for a shift in `direction` (0: either way); the noise floor is the within-window variance,
    at least `RELATIVE_FLOOR` of the level."""
    count = sums[:, :, SignalSum.COUNT]
    mean, within = _within(sums)
    scale = np.nanmean(np.abs(mean), axis=1) if mean.shape[0] else np.zeros(0)
    floor = np.maximum(within, (RELATIVE_FLOOR * np.nan_to_num(scale)) ** 2 + 1e-18)[:, None]
    rows = x.rows([(nodes, mean, count, labels)], direction, floor)
    if direction == 0:
        rows.score = np.abs(rows.score)
        return rows
    return _towards(rows, direction)


def _signal_rows(x: LlmExtractor, signal: Signal, direction: int) -> Rows:
    """Per node, the window means of one signal."""
    nodes, s = _by_signal(x.series.signals, signal)
    return level_rows(x, nodes, s, _label(signal.name.lower(), nodes.shape[0]), direction)


def _inversion(x: LlmExtractor) -> Rows:
    """Per node and window, how much longer urgent requests wait in the queue than ordinary
    ones: the log ratio of their mean waits (each offset by `QUEUE_RESOLUTION_S`, so empty
    queues compare), which load moves for both groups alike. The per-observation noise is at
    least the ordinary waits' squared coefficient of variation within windows. The levels
    reported (and gated) are the difference of the mean waits in seconds, before and after
    the row's onset."""
    table = x.series.signals
    urgent_nodes, u = _by_signal(table, Signal.QUEUE_TIME_URGENT)
    ordinary_nodes, o = _by_signal(table, Signal.QUEUE_TIME_ORDINARY)
    nodes, iu, io = np.intersect1d(urgent_nodes, ordinary_nodes, assume_unique=True, return_indices=True)
    u, o = u[iu], o[io]
    nu, no = u[:, :, SignalSum.COUNT], o[:, :, SignalSum.COUNT]
    urgent = per_window_mean(u[:, :, SignalSum.SUM], nu)
    ordinary, within = _within(o)
    weight = np.where((nu > 0) & (no > 0), 1.0 / (1.0 / np.maximum(nu, 1.0) + 1.0 / np.maximum(no, 1.0)), 0.0)
    level = o[:, :, SignalSum.SUM].sum(axis=1) / np.maximum(no.sum(axis=1), 1.0) + QUEUE_RESOLUTION_S
    floor = np.maximum(within / level**2, RELATIVE_FLOOR**2)[:, None]
    ratio = _log_ratio(urgent + QUEUE_RESOLUTION_S, ordinary + QUEUE_RESOLUTION_S)
    label = _label("queue_wait_urgent_minus_ordinary_s", nodes.shape[0])
    rows = x.rows([(nodes, ratio, weight, label)], 1, floor)
    difference = np.where(weight > 0, urgent - ordinary, 0.0)
    after = np.arange(weight.shape[1])[None, :] >= rows.shift.onset[:, None]
    baseline, observed = (
        (difference * weight * side).sum(axis=1) / np.maximum((weight * side).sum(axis=1), 1e-12)
        for side in (~after, after)
    )
    rows.shift = Shift(rows.shift.onset, baseline, observed, rows.shift.score)
    return rows


def _engine_parts(table: Table) -> list[Part]:
    """Engine timings per token of the requests they timed, and scheduler time per request."""
    parts = []
    for time, tokens, label in PER_TOKEN:
        time_nodes, t = _by_signal(table, time)
        token_nodes, k = _by_signal(table, tokens)
        nodes, it, ik = np.intersect1d(time_nodes, token_nodes, assume_unique=True, return_indices=True)
        if nodes.shape[0]:
            y = _log_ratio(t[it, :, SignalSum.SUM], k[ik, :, SignalSum.SUM])
            parts.append((nodes, y, t[it, :, SignalSum.COUNT], _label(label, nodes.shape[0])))
    nodes, s = _by_signal(table, Signal.SCHEDULER_TIME)
    if nodes.shape[0]:
        y = _log_ratio(s[:, :, SignalSum.SUM], s[:, :, SignalSum.COUNT])
        parts.append((nodes, y, s[:, :, SignalSum.COUNT], _label("scheduler_time_s", nodes.shape[0])))
    return parts


@dataclass(frozen=True, slots=True)
class _ServedTokens:
    """Output tokens per window that a GPU served: those of the requests of the engines calling
    its rank (the node's owning service), or of the rank itself; of the engine replica in the
    GPU's own pod where one counted tokens (`_pod_tokens`); none from window `running_from` on
    (`_running_from`). Decode steps, one per output token, are most of a GPU's time and memory
    traffic. Found once per ranking, read by each per-token row."""

    names: Names
    sources: Index  # services whose requests count output tokens
    sums: Array  # (sources, windows): their tokens
    pairs: Index  # pair_key(source, node): the node serves the source's requests
    token_nodes: Index  # the nodes that counted tokens
    tokens: Array  # (token nodes, windows)
    running_from: int

    @staticmethod
    def of(x: LlmExtractor) -> _ServedTokens:
        token_nodes, tokens = _by_signal(x.series.signals, Signal.OUTPUT_TOKENS)
        sources, sums = _by_service(x, token_nodes, tokens)
        keys = x.series.edges.keys
        caller, callee = x.node_of[high(keys)], x.node_of[low(keys)]
        called = np.isin(caller, sources) & (caller != callee)
        pairs = np.unique(np.concatenate([pair_key(caller[called], callee[called]), pair_key(sources, sources)]))
        token_sums = tokens[:, :, SignalSum.SUM]
        return _ServedTokens(
            x.names, sources, sums[:, :, SignalSum.SUM], pairs, token_nodes, token_sums, _running_from(x)
        )

    def to(self, nodes: Index) -> Array:
        """(nodes, windows): what each of `nodes` (GPU nodes) served."""
        if self.sources.shape[0] == 0 or nodes.shape[0] == 0:
            return np.zeros((nodes.shape[0], self.sums.shape[1]))
        owner = np.asarray(self.names.owners, np.int64)[nodes]
        serves = (owner[:, None] == low(self.pairs)[None, :]).astype(np.float64)
        served: Array = serves @ self.sums[np.searchsorted(self.sources, high(self.pairs))]
        in_pod, pod_served = _pod_tokens(self.names, nodes, self.token_nodes, self.tokens)
        served[in_pod] = pod_served[in_pod]
        served[:, self.running_from :] = 0.0  # no observation: see `_running_from`
        return served


def _pod_tokens(names: Names, nodes: Index, token_nodes: Index, tokens: Array) -> tuple[npt.NDArray[np.bool_], Array]:
    """Per GPU of `nodes`, whether an instance in its pod (`Names.pods`) counted output tokens,
    and their sum per window: an engine replica's GPUs serve its requests only, where replicas
    share the service's name (one Deployment's pods) and so its token sums."""
    by_pod: dict[str, list[int]] = {}
    for row, node in enumerate(token_nodes.tolist()):
        instance = names.instance_names.get(node)
        if instance is not None:
            by_pod.setdefault(instance, []).append(row)
    served = np.zeros((nodes.shape[0], tokens.shape[1]))
    in_pod = np.zeros(nodes.shape[0], np.bool_)
    if not by_pod:
        return in_pod, served
    for k, node in enumerate(nodes.tolist()):
        rows = by_pod.get(names.pods.get(node, ""))
        if rows:
            in_pod[k] = True
            served[k] = tokens[rows].sum(axis=0)
    return in_pod, served


def _by_service(x: LlmExtractor, nodes: Index, sums: Array) -> tuple[Index, Array]:
    """`_by_signal`'s rows summed per service (an engine's tokens over all its instances)."""
    services, group = np.unique(x.names.signal_owners(nodes), return_inverse=True)
    return services, sum_rows(group.reshape(-1), sums, services.shape[0])


def _running_from(x: LlmExtractor) -> int:
    """The first of the newest windows whose requests may still be running: the newest window
    any span ended in (later ones hold nothing yet; it is cut short itself) and those within
    twice the engines' longest mean request (e2e) time before it. A request's tokens arrive with
    its span when it ends, its GPU work with forward spans that end before it, so in those
    windows the GPU's time per token served would rise with the requests still in flight, fault
    or none."""
    nodes, s = _by_signal(x.series.signals, Signal.E2E_LATENCY)
    if nodes.shape[0] == 0:
        return x.series.windows
    mean_s = s[:, :, SignalSum.SUM].sum(axis=1) / np.maximum(s[:, :, SignalSum.COUNT].sum(axis=1), 1.0)
    ended = np.flatnonzero(x.series.ops.sums[:, :, OpSum.CALLS].sum(axis=0))
    newest = int(ended[-1]) if ended.shape[0] else 0
    return max(newest - int(np.ceil(2.0 * float(mean_s.max()) * 1e9 / x.series.window_ns)), 0)


def _gpu_compute(x: LlmExtractor) -> tuple[Index, Array, Array]:
    """GPU nodes, their compute seconds per window (self time less lockstep wait) and calls;
    `nccl:` spans that name the GPU are its communication, not its compute."""
    ops = x.series.ops
    node = x.node_of[ops.keys]
    resource = x.names.of_kind(NodeKind.RESOURCE)
    rows = np.flatnonzero(resource[node] & ~np.isin(x.op_of[ops.keys], x.names.nccl_ops))
    nodes, group = np.unique(node[rows], return_inverse=True)
    s = ops.sums[rows]
    busy = s[:, :, OpSum.DURATION] - s[:, :, OpSum.CHILD_DURATION] - s[:, :, OpSum.WAIT]
    return nodes, sum_rows(group, busy, nodes.shape[0]), sum_rows(group, s[:, :, OpSum.CALLS], nodes.shape[0])


def _per_token(nodes: Index, total: Array, weight: Array, served: Array, label: str) -> list[Part]:
    """`total` per token served, as a log-ratio part (none where no tokens are known)."""
    if not served.any():
        return []
    return [(nodes, _log_ratio(total, served), weight, _label(label, nodes.shape[0]))]


def _gpu_time(x: LlmExtractor, served: _ServedTokens) -> list[Part]:
    """GPU compute seconds per output token served (latency)."""
    nodes, compute, calls = _gpu_compute(x)
    return _per_token(nodes, compute, calls, served.to(nodes), "gpu_time_per_output_token_s")


def _gpu_signal_per_token(x: LlmExtractor, signal: Signal, label: str, served: _ServedTokens) -> Rows:
    """A GPU signal's window sum per output token served, rising."""
    nodes, s = _by_signal(x.series.signals, signal)
    per_token = _per_token(nodes, s[:, :, SignalSum.SUM], s[:, :, SignalSum.COUNT], served.to(nodes), label)
    return _ratio_rows(x, per_token, 1)


def _nccl_bandwidth(x: LlmExtractor) -> Rows:
    """Per rank, NCCL bytes per second spent in NCCL operations (its effective bandwidth); a
    drop scores."""
    table = x.series.signals
    nodes, b = _by_signal(table, Signal.NCCL_BYTES)
    seconds = np.zeros((nodes.shape[0], table.sums.shape[1]))
    for signal in (Signal.NCCL_LATENCY, Signal.NCCL_P2P_LATENCY):
        timed, s = _by_signal(table, signal)
        row, known = find_sorted(nodes, timed)
        seconds[row[known]] += s[known, :, SignalSum.SUM]
    part = (
        nodes,
        _log_ratio(b[:, :, SignalSum.SUM], seconds),
        b[:, :, SignalSum.COUNT],
        _label("nccl_bytes_per_s", nodes.shape[0]),
    )
    return _ratio_rows(x, [part], -1)


def _where_allocation_low(rows: Rows, allocation: Rows) -> Rows:
    """`rows` counted as far as their node's block allocation is low (docs/interface.md: L2 sectors
    point to `kv_cache_fragmentation` when high with low block allocation). Usage and L2
    traffic also rise with load; only with allocation low do they read as fragmentation."""
    at, known = find_sorted(allocation.node, rows.node)
    level = np.ones(rows.node.shape[0])  # no allocation measured: nothing says it is low
    level[known] = allocation.shift.observed[at[known]]
    rows.score = np.maximum(rows.score, 0.0) * _share(level, 0.95, 0.7)
    return rows


def llm_rows(x: LlmExtractor) -> LlmRows:
    """Every LLM-serving row, by the class it points to (empty where no span carries them)."""
    table = x.series.signals
    if table.keys.shape[0] == 0:
        return LlmRows([], {fault: x.rows([], 1, 0.0) for fault in LLM_CLASSES}, x.rows([], 1, 0.0))
    bandwidth = _signal_rows(x, Signal.GPU_DRAM_UTILIZATION, 1)
    gate(bandwidth, 0.75, 0.9)
    allocation = _signal_rows(x, Signal.KV_BLOCK_ALLOCATION_RATE, -1)
    served = _ServedTokens.of(x)
    l2 = _gpu_signal_per_token(x, Signal.GPU_L2_SECTORS, "l2_sectors_per_output_token", served)
    loaded = tuple(_where_allocation_low(r, allocation) for r in (l2, _signal_rows(x, Signal.KV_USAGE, 1)))
    gate(allocation, 0.95, 0.7)
    block = _signal_rows(x, Signal.KV_AVG_BLOCK_SIZE, -1)
    gate(block, 128 * 1024.0, 32 * 1024.0)
    queue = _inversion(x)
    gate(queue, 0.0, QUEUE_RESOLUTION_S)
    p2p = _signal_rows(x, Signal.NCCL_P2P_LATENCY, 1)
    gate(p2p, 8e-6, 15e-6)  # interface: Send normally < 8 µs, > 15 µs is contention
    remote = _signal_rows(x, Signal.NUMA_REMOTE_RATIO, 1)
    gate(remote, 0.1, 0.15)
    collective = _signal_rows(x, Signal.NCCL_LATENCY, 1)  # the rank's wait in collectives
    overlap = _signal_rows(x, Signal.NCCL_OVERLAP, -1)
    _as_far_as_lost(overlap)
    dram = _gpu_signal_per_token(x, Signal.GPU_DRAM_BYTES, "dram_bytes_per_output_token", served)
    classes = {
        Fault.GPU_MEMORY_BANDWIDTH: merge_rows(bandwidth, dram),
        Fault.KV_CACHE_FRAGMENTATION: _merge((allocation, block, *loaded)),
        Fault.SCHEDULER_PRIORITY_INVERSION: queue,
        Fault.NCCL_COMMUNICATION: merge_rows(p2p, overlap),
        Fault.NUMA_MISMATCH: merge_rows(_signal_rows(x, Signal.NUMA_MISMATCH, 1), remote),
    }
    wait = merge_rows(collective, _nccl_bandwidth(x))
    owners = x.names.signal_owners
    for rows in (*classes.values(), wait):
        rows.node = owners(rows.node)
    latency = [
        (owners(nodes), y, weight, labels)
        for nodes, y, weight, labels in [*_engine_parts(table), *_gpu_time(x, served)]
    ]
    return LlmRows(latency, classes, wait)


def _merge(rows: tuple[Rows, ...]) -> Rows:
    merged = rows[0]
    for more in rows[1:]:
        merged = merge_rows(merged, more)
    return merged


def communicators(x: LlmExtractor, present: Index, pairs: Index) -> Index:
    """Per node of `present` (graph node ids, ascending), its NCCL communicator numbered from 0:
    ranks (nodes with collectives) called by a common caller, transitively; -1 for other nodes
    (a rank's GPU reaches its communicator through its owner)."""
    table = x.series.signals
    out = np.full(present.shape[0], -1, np.int64)
    ranks = np.unique(x.names.signal_owners(_by_signal(table, Signal.NCCL_LATENCY)[0]))
    rank_rows, known = find_sorted(present, ranks)
    if not known.any():
        return out
    is_rank = np.zeros(present.shape[0], np.bool_)
    is_rank[rank_rows[known]] = True
    at, found = find_sorted(present, pairs.reshape(-1))
    ends = at.reshape(-1, 2)
    link = ends[found.reshape(-1, 2).all(axis=1) & is_rank[ends[:, 1]] & (ends[:, 0] != ends[:, 1])]
    n = present.shape[0]
    adjacency = csr_matrix((np.ones(link.shape[0]), (link[:, 0], link[:, 1])), shape=(n, n))
    _, component = connected_components(adjacency, directed=False)
    _, number = np.unique(component[is_rank], return_inverse=True)
    out[is_rank] = number
    return out


def request_timers(x: LlmExtractor, present: Index) -> npt.NDArray[np.bool_]:
    """Per node of `present` (graph node ids, ascending), whether it times whole LLM requests
    (TTFT, prefill, decode or e2e: an engine), timings that include the work of all it waits on."""
    timers = x.names.signal_owners(np.concatenate([_by_signal(x.series.signals, time)[0] for time, _, _ in PER_TOKEN]))
    engine: npt.NDArray[np.bool_] = np.isin(present, timers)
    return engine


def engine_gpus(names: Names, present: Index) -> Index:
    """Per node of `present` (graph node ids, ascending), its group of the GPUs one engine runs
    one model on in lockstep: the GPUs of one pod of a service (`Names.pods`: its replicas run
    apart), or of the service where no pod is named; numbered from 0. -1 for other
    nodes and for a group's only GPU (as each rank's GPU in traced workers is: those ranks'
    collectives say more, `communicators`)."""
    out = np.full(present.shape[0], -1, np.int64)
    owners = _gpu_owners(names, present)
    rows = np.flatnonzero(owners >= 0)
    pods: dict[str, int] = {}
    pod = [pods.setdefault(names.pods.get(node, ""), len(pods)) for node in present[rows].tolist()]
    key = owners[rows] * max(len(pods), 1) + np.asarray(pod, np.int64)
    engines, group, size = np.unique(key, return_inverse=True, return_counts=True)
    if engines.shape[0]:
        shared = size[group] > 1
        out[rows[shared]] = np.unique(group[shared], return_inverse=True)[1]
    return out


def _gpu_owners(names: Names, nodes: Index) -> Index:
    """Per node id (network nodes' ids past the graph's nodes allowed), the service owning it where
    it is a GPU (`gpu:{host}/{index}`) that a service owns; -1 elsewhere."""
    owned = [
        names.owners[node]
        if node < len(names.nodes)  # the others are callees' network nodes
        and names.kinds[node] is NodeKind.RESOURCE
        and names.nodes[node].startswith(GPU_PREFIX)
        and names.owners[node] != node
        and names.kinds[names.owners[node]] is NodeKind.SERVICE
        else -1
        for node in nodes.tolist()
    ]
    return np.asarray(owned, np.int64)
