"""Metric evidence (interface: metrics): each mapped measure of each node, a change-point row.

A row is the window means of the measure's observations on the node (`rca.graph.metric_measures`),
scored for a shift the way its table entry says a fault moves it (up, down or either way), and
gated between the entry's healthy and faulty levels where it names them. Rows go to the class
their entry points to, beside the span and log rows of that class, and read `metric.{signal}:
{metric name}` in the evidence.
"""

from __future__ import annotations

import numpy as np

from rca.evidence.llm import LlmExtractor, gate, level_rows
from rca.evidence.rows import Labels, Rows, merge_rows
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
        mine = np.flatnonzero(measure == m)
        text = f"{PREFIX}{rule.signal}:{measures[m]}"
        labels = Labels(text, np.full(mine.shape[0], -1, np.int64))
        rows = level_rows(x, measure_node(metrics.keys[mine]), metrics.sums[mine], labels, rule.direction)
        if rule.healthy is not None and rule.faulty is not None:
            gate(rows, rule.healthy, rule.faulty)
        out[rule.fault] = merge_rows(out[rule.fault], rows) if rule.fault in out else rows
    return out
