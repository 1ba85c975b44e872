"""Metric evidence (interface: metrics): each mapped measure of each node, a change-point row.

A row is the window means of the measure's observations on the node (`rca.graph.metric_measures`),
scored for a shift the way its table entry says a fault moves it (up, down or either way), and
gated between the entry's healthy and faulty levels where it names them. Rows go to the class
their entry points to, beside the span and log rows of that class, and read `metric.{signal}:
{metric name}` in the evidence. An entry with `peers` also scores each GPU that runs in lockstep
with others of its engine by its share beside their mean (`metric.{signal}_among_peers:{name}`).
"""

from __future__ import annotations

import numpy as np

from rca.evidence.llm import LlmExtractor, engine_gpus, gate, level_rows
from rca.evidence.rows import Array, Index, Labels, Rows, merge_rows, per_window_mean, sum_rows
from rca.graph.accumulators import SignalSum
from rca.graph.keys import measure_node, measure_of
from rca.telemetry.faults import Fault
from rca.telemetry.metric_table import MetricRule, MetricTable

PREFIX = "metric."


def metric_rows(x: LlmExtractor, table: MetricTable, measures: list[str]) -> dict[Fault, Rows]:
    """The rows of every mapped measure in the window series, by the fault class they point to."""
    metrics = x.series.metrics
    measure = measure_of(metrics.keys)
    rules: dict[int, MetricRule] = {}
    for m in np.unique(measure).tolist():
        rule = table.rule(measures[m])
        if rule is not None:  # a measure outside the table now (the config changed): not evidence
            rules[m] = rule
    out: dict[Fault, Rows] = {}
    for m, rule in rules.items():
        if rule.measured_only:
            continue
        mine = np.flatnonzero(measure == m)
        nodes, sums = measure_node(metrics.keys[mine]), metrics.sums[mine]
        if rule.share_of is not None:
            partner = table.rule(rule.share_of)
            nodes, sums = _share(nodes, sums, *_partner(rules, partner, measure, metrics.keys, metrics.sums))
        if rule.peers is not None:
            grouped, shares = _among_peers(engine_gpus(x.names, nodes), nodes, sums)
            label = f"{PREFIX}{rule.signal}_among_peers:{measures[m]}"
            peer_rows = level_rows(x, grouped, shares, _labels(label, grouped), rule.direction)
            out[rule.fault] = merge_rows(out[rule.fault], peer_rows) if rule.fault in out else peer_rows
            if rule.peers == "only":
                alone = ~np.isin(nodes, grouped)
                nodes, sums = nodes[alone], sums[alone]
        rows = level_rows(x, nodes, sums, _labels(f"{PREFIX}{rule.signal}:{measures[m]}", nodes), rule.direction)
        if rule.healthy is not None and rule.faulty is not None:
            gate(rows, rule.healthy, rule.faulty)
        out[rule.fault] = merge_rows(out[rule.fault], rows) if rule.fault in out else rows
    for rows in out.values():  # a service's pods' rows on the service: its score is its strongest pod's
        rows.node = x.names.signal_owners(rows.node)
    return out


def _labels(text: str, nodes: Index) -> Labels:
    return Labels(text, np.full(nodes.shape[0], -1, np.int64))


def _among_peers(lockstep: Index, nodes: Index, sums: Array) -> tuple[Index, Array]:
    """The nodes with peers (their `lockstep` group, `engine_gpus`, not -1) and the window sums
    of each one's share of its level plus its peers' mean level, the peers that had readings in
    the window: what their common load moves cancels, a straggler or a slow link stands out."""
    keep = np.flatnonzero(lockstep >= 0)
    if keep.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros((0, *sums.shape[1:]))
    group = lockstep[keep]
    mine = sums[keep]
    count = mine[:, :, SignalSum.COUNT]
    mean = np.nan_to_num(per_window_mean(mine[:, :, SignalSum.SUM], count))
    read = (count > 0).astype(np.float64)
    total, readers = sum_rows(group, mean, group.max() + 1), sum_rows(group, read, group.max() + 1)
    others = readers[group] - read
    peers = np.where(others > 0, (total[group] - mean) / np.maximum(others, 1.0), 0.0)
    weight = np.where(others > 0, count, 0.0)
    peer_sums = np.stack([weight, peers * weight, peers * peers * weight], axis=-1)
    return _share(nodes[keep], mine, nodes[keep], peer_sums)


def _partner(
    rules: dict[int, MetricRule], partner: MetricRule | None, measure: Index, keys: Index, sums: Array
) -> tuple[Index, Array]:
    """The nodes and window sums of the measures `partner` is the rule of (every spelling of it)."""
    found = [m for m, rule in rules.items() if rule is partner]
    mine = np.flatnonzero(np.isin(measure, found))
    return measure_node(keys[mine]), sums[mine]


def _share(nodes: Index, sums: Array, partner_nodes: Index, partner_sums: Array) -> tuple[Index, Array]:
    """Per node with both measures, the window sums of the measure's share of the two (its mean
    over both means, weighted as the fewer observations): what load moves for both alike cancels."""
    both, mine, theirs = np.intersect1d(nodes, partner_nodes, return_indices=True)
    a, b = sums[mine], partner_sums[theirs]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_a = a[:, :, SignalSum.SUM] / a[:, :, SignalSum.COUNT]
        mean_b = b[:, :, SignalSum.SUM] / b[:, :, SignalSum.COUNT]
        share = mean_a / (mean_a + mean_b)
    count = np.minimum(a[:, :, SignalSum.COUNT], b[:, :, SignalSum.COUNT])
    count = np.where(np.isfinite(share), count, 0.0)
    share = np.nan_to_num(share)
    out = np.stack([count, share * count, share * share * count], axis=-1)
    return both.astype(np.int64), out
