"""Log evidence (interface: logs): error-severity rate and the template mix, as change-point rows.

Per node, the share of its records at error severity is a rate like a span error rate. Per node
(or per node-operation, where most of the node's records joined to their spans) each template's
share of the records (of the node's non-error records, for a non-error template) is a row of its
own, tested both ways: a template that appears (new against the baseline), one that vanishes (a
code path no longer taken) and one whose share moves (the mix shifted). Error templates (mostly
at error severity, or naming an exception at any level: a caught exception logged as a warning
is still an exception) that rise are `errors` evidence; every other template move is
`call_structure` evidence. Each row's Welch statistic is capped by a binomial count test, as span
error rates are, because a template seen a handful of times is not a 5-sigma shift.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import Protocol

import numpy as np
import numpy.typing as npt

from rca.evidence.changepoint import Shift
from rca.evidence.rows import (
    Array,
    Index,
    Labels,
    Rows,
    binomial_score,
    find_sorted,
    merge_rows,
    per_window_mean,
    sum_rows,
)
from rca.graph.accumulators import LogSum
from rca.graph.keys import high, low
from rca.graph.series import Table

PREFIX = "log."
ERROR_TEMPLATE_SHARE = 0.5  # a template most of whose records are errors is an error template
JOINED_SHARE = 0.5  # a node whose records mostly joined to spans is read per operation
TEXT_CHARS = 200
ERROR_RATE_FLOOR = 0.01


class LogExtractor(Protocol):
    """What log rows need of the evidence extractor."""

    node_of: Index  # node of each node-operation id

    def rows(self, parts: list[tuple[Index, Array, Array, Labels]], direction: int, floor: Array | float) -> Rows: ...

    def op_name(self, nodeop: int) -> str: ...


class TemplateTexts(Protocol):
    """What log rows need of the template miner (`rca.graph.logtemplates.TemplateMiner`)."""

    def text(self, template: int) -> str: ...

    def error_reports(self, templates: Index) -> npt.NDArray[np.bool_]: ...


@dataclass(frozen=True, slots=True)
class LogRows:
    """Log rows of the two classes logs point to."""

    errors: Rows
    call_structure: Rows


def _template_rows(
    x: LogExtractor,
    table: Table,
    group_node: Callable[[Index], Index],
    group_name: Callable[[int], str],
    templates: TemplateTexts,
) -> tuple[Rows, npt.NDArray[np.bool_]]:
    """One row per (group, template): an error template's share of the group's records per
    window, any other template's share of the group's other records (so that an error burst
    does not read as a change of code path), tested both ways; and which rows are error templates
    (most of their records at error severity, or reporting an error at any level:
    `rca.telemetry.logs.reports_error`)."""
    group = high(table.keys)
    groups, row_group = np.unique(group, return_inverse=True)
    records = table.sums[:, :, LogSum.RECORDS]
    error = table.sums[:, :, LogSum.ERRORS].sum(axis=1) > ERROR_TEMPLATE_SHARE * records.sum(axis=1)
    error |= templates.error_reports(low(table.keys))
    every = sum_rows(row_group, records, groups.shape[0])[row_group]
    ordinary = sum_rows(row_group, records * ~error[:, None], groups.shape[0])[row_group]
    totals = np.where(error[:, None], every, ordinary)
    share = per_window_mean(records, totals)
    mean = (records.sum(axis=1) + 0.5) / (totals.sum(axis=1) + 1.0)
    floor = mean * (1.0 - mean)  # binomial: records of one window as independent draws
    template = low(table.keys)
    shift_holder: list[Shift] = []

    def name(row: int) -> str:
        s = shift_holder[0]
        if s.baseline[row] <= 0:
            kind = "template_new"
        else:
            kind = "template_vanished" if s.observed[row] <= 0 else "template_shift"
        where = group_name(int(group[row]))
        return f"{PREFIX}{kind}:{where}: {templates.text(int(template[row]))[:TEXT_CHARS]}"

    label = Labels("", np.arange(table.keys.shape[0], dtype=np.int64), name)
    rows = x.rows([(group_node(group), share, totals, label)], 0, floor)
    shift_holder.append(rows.shift)
    if rows.score.shape[0]:
        moved = np.flatnonzero(rows.score != 0)
        capped = binomial_score(rows.shift, moved, totals[moved], lower=rows.score[moved] < 0)
        rows.score[moved] = np.sign(rows.score[moved]) * np.minimum(np.abs(rows.score[moved]), capped)
        _explain_by_failures(x, rows, error, records, every, every - ordinary, floor, group_node(group))
    return rows, error


def _explain_by_failures(
    x: LogExtractor,
    rows: Rows,
    error: npt.NDArray[np.bool_],
    records: Array,
    every: Array,
    failures: Array,
    floor: Array,
    node: Index,
) -> None:
    """A line whose share of its group's ordinary records moves no further than failures explain
    is a failure's evidence, not a changed code path: a request that fails before its last line
    writes its error line in place of that one, so the last line falls and the lines every
    request writes rise. Each moved line's score (in place) is at most how far it moves with the
    error records (`failures`, per window) counted in: as lines of its own where it fell, as
    other lines where it rose."""
    moved = np.flatnonzero((rows.score != 0) & ~error)
    if moved.shape[0] == 0:
        return
    fell = rows.score[moved] < 0
    as_if = per_window_mean(records[moved] + fell[:, None] * failures[moved], every[moved])
    label = Labels("", np.arange(moved.shape[0], dtype=np.int64))
    explained = x.rows([(node[moved], as_if, every[moved], label)], 0, floor[moved]).score
    sign = np.sign(rows.score[moved])
    rows.score[moved] = sign * np.minimum(np.abs(rows.score[moved]), np.maximum(sign * explained, 0.0))


def _select(rows: Rows, keep: npt.NDArray[np.bool_], score: Array) -> Rows:
    """The rows where `keep` holds, scored by `score`. Rows left out count nowhere, not even in
    the multiple-testing allowance of their node."""
    (label,) = rows.labels
    s = rows.shift
    return Rows(
        rows.node[keep],
        Shift(s.onset[keep], s.baseline[keep], s.observed[keep], s.score[keep]),
        [Labels(label.prefix, label.index[keep], label.name)],
        score[keep],
    )


def _distinct_series(table: Table) -> npt.NDArray[np.bool_]:
    """Whether each row is the first of its group with its count series: templates written
    together on every call (one code path) are one test, not several."""
    keyed = np.concatenate([high(table.keys)[:, None].astype(np.float64), table.sums[:, :, LogSum.RECORDS]], axis=1)
    first = np.zeros(table.keys.shape[0], np.bool_)
    if keyed.shape[0]:
        first[np.unique(keyed, axis=0, return_index=True)[1]] = True
    return first


def log_rows(
    x: LogExtractor,
    logs: Table,
    log_ops: Table,
    node_name: Callable[[int], str],
    templates: TemplateTexts,
) -> LogRows:
    """The `errors` and `call_structure` rows of the log tables (`rca.graph.series.WindowSeries.logs`
    and `.log_ops`); `templates` names template ids and tells which report errors."""
    if logs.keys.shape[0] == 0:
        empty = x.rows([], 0, 0.0)
        return LogRows(empty, empty)
    node = high(logs.keys)
    nodes, node_row = np.unique(node, return_inverse=True)
    records = sum_rows(node_row, logs.sums[:, :, LogSum.RECORDS], nodes.shape[0])
    errors = sum_rows(node_row, logs.sums[:, :, LogSum.ERRORS], nodes.shape[0])
    rate_label = Labels(f"{PREFIX}error_rate", np.full(nodes.shape[0], -1, np.int64))
    error_rate = x.rows([(nodes, per_window_mean(errors, records), records, rate_label)], 1, ERROR_RATE_FLOOR)
    shifted = np.flatnonzero(error_rate.score > 0)
    error_rate.score[shifted] = np.minimum(
        error_rate.score[shifted], binomial_score(error_rate.shift, shifted, records[shifted])
    )
    # Nodes read per operation: most of their records found their span.
    position = np.searchsorted(nodes, x.node_of[high(log_ops.keys)])
    joined = sum_rows(position, log_ops.sums[:, :, LogSum.RECORDS].sum(axis=1), nodes.shape[0])
    per_op = nodes[joined > JOINED_SHARE * records.sum(axis=1)]
    by_node, node_error = _template_rows(x, logs, lambda g: g, node_name, templates)
    by_op, op_error = _template_rows(x, log_ops, lambda g: x.node_of[g], x.op_name, templates)
    use_node = ~np.isin(by_node.node, per_op) & _distinct_series(logs)
    use_op = np.isin(by_op.node, per_op) & _distinct_series(log_ops)
    rising_errors = [  # an error template that falls is no fault's evidence
        _select(by_node, use_node & node_error & (by_node.score > 0), by_node.score),
        _select(by_op, use_op & op_error & (by_op.score > 0), by_op.score),
    ]
    structure = [
        _select(by_node, use_node & ~node_error, np.abs(by_node.score)),
        _select(by_op, use_op & ~op_error, np.abs(by_op.score)),
    ]
    return LogRows(reduce(merge_rows, rising_errors, error_rate), reduce(merge_rows, structure))


def error_lines(log_ops: Table, templates: TemplateTexts, nodeops: Index) -> Array:
    """Per node-operation of `nodeops`, its log records per window (`log_ops`'s windows) that
    report an error: those of error severity, and every record of a template that reports one at
    any level (`TemplateTexts.error_reports`)."""
    out = np.zeros((nodeops.shape[0], log_ops.sums.shape[1]))
    if log_ops.keys.shape[0] == 0:
        return out
    reports = templates.error_reports(low(log_ops.keys))
    lines = np.where(reports[:, None], log_ops.sums[:, :, LogSum.RECORDS], log_ops.sums[:, :, LogSum.ERRORS])
    ops, row = np.unique(high(log_ops.keys), return_inverse=True)
    per_op = sum_rows(row, lines, ops.shape[0])
    at, found = find_sorted(ops, nodeops)
    out[found] = per_op[at[found]]
    return out
