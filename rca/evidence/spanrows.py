"""Span rows of the evidence (interface: traces): self time (latency; calls to uninstrumented callees
moved from the caller's self time to the virtual callee, and client calls' self time, time on the
wire, to a network node per callee), error rate (also tested as binomial counts) and call structure
(downstream calls per successful call of each operation, either way), each split at its own change point
(`rca.evidence.changepoint`). `SpanExtractor` also carries what the LLM, log and metric rows read."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rca.evidence.changepoint import Shift, mean_shift
from rca.evidence.llm import Part
from rca.evidence.logs import error_lines
from rca.evidence.rows import Labels, Rows, binomial_score, find_sorted, log_window_mean, per_window_mean, sum_rows
from rca.graph.accumulators import EdgeSum, OpSum
from rca.graph.keys import high, low
from rca.graph.names import NodeKind
from rca.graph.series import WindowSeries
from rca.graph.service_graph import ServiceGraph

MIN_BASELINE_WINDOWS = 2
LATENCY_FLOOR_S = 1e-4  # self times below 100 µs are noise, not latency
Array = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]


class SpanExtractor:
    """The window series of one incident and how rows of them are scored: the span rows of
    latency, errors and call structure here; the LLM, log and metric rows read it too."""

    def __init__(self, graph: ServiceGraph, series: WindowSeries, first: int) -> None:
        self.names = graph.names
        self.templates = graph.templates
        self.measures = graph.measures
        self.series = series
        self.first = first
        self.last = series.windows - MIN_BASELINE_WINDOWS
        self.node_of = graph.names.nodeop_node
        self.op_of = graph.names.nodeop_op
        self.network_base = len(graph.names.nodes)  # node ids from here on: callees' network nodes
        self.edge_caller, self.edge_caller_known = self._edge_callers()
        self.client, self.wire_edges = self._client_calls()
        self.unpaired_edges, self.unpaired_sums, self.unpaired = self._unpaired_calls()

    def shift(self, y: Array, w: Array, direction: int, floor: Array | float) -> Shift:
        return mean_shift(y, w, first=self.first, last=self.last, direction=direction, variance_floor=floor)

    def op_name(self, nodeop: int) -> str:
        node, op = self.names.nodes[int(self.node_of[nodeop])], self.names.ops[int(self.op_of[nodeop])]
        return f"{node}:{op}" if op else node

    def _edge_name(self, row: int) -> str:
        key = self.series.edges.keys[row : row + 1]
        caller, callee = int(high(key)[0]), int(low(key)[0])
        return f"{self.op_name(caller)} -> {self.names.nodes[int(self.node_of[callee])]}"

    def op_label(self, nodeop: Index, prefix: str) -> Labels:
        return Labels(prefix, self.op_of[nodeop], self.names.ops.__getitem__)

    def _edge_callers(self) -> tuple[Index, npt.NDArray[np.bool_]]:
        """Per edge row, the ops row of its caller operation, and whether the window has that row."""
        return find_sorted(self.series.ops.keys, high(self.series.edges.keys))

    def _client_calls(self) -> tuple[npt.NDArray[np.bool_], Index]:
        """Client calls: node-operations (mask over ops) whose every call has one child, always
        on another node, so their self time is time on the wire and in the callees' network
        stacks, not the caller's own work; and the edge rows they call along."""
        ops, edges = self.series.ops, self.series.edges
        children = edges.sums[:, :, EdgeSum.CALLS].sum(axis=1)
        rows = np.flatnonzero((children > 0) & self.edge_caller_known)
        caller = self.edge_caller[rows]
        local = self.node_of[low(edges.keys[rows])] == self.node_of[ops.keys[caller]]
        has_local = np.bincount(caller, weights=local, minlength=ops.keys.shape[0]) > 0
        per_op = np.bincount(caller, weights=children[rows], minlength=ops.keys.shape[0])
        calls = ops.sums[:, :, OpSum.CALLS].sum(axis=1)
        client = (calls > 0) & ~has_local & (np.abs(per_op - calls) <= 0.1 * calls)
        return client, rows[client[caller]]

    # -- service and virtual nodes ---------------------------------------------------------

    def latency_and_errors(self, more_latency: list[Part]) -> tuple[Rows, Rows]:
        """Latency rows (with `more_latency`, log seconds) and error rows. A compute span's
        self time excludes its lockstep wait, and `nccl:` operations are NCCL evidence only."""
        ops, edges = self.series.ops, self.series.edges
        calls = ops.sums[:, :, OpSum.CALLS]
        virtual_time = self._unpaired_peer_time()
        s = ops.sums
        self_time = s[:, :, OpSum.DURATION] - s[:, :, OpSum.CHILD_DURATION] - s[:, :, OpSum.WAIT] - virtual_time
        log_self = log_window_mean(self_time, calls, LATENCY_FLOOR_S)
        own = ~self.client & ~np.isin(self.op_of[ops.keys], self.names.nccl_ops)
        labels = self.op_label(ops.keys[own], "self_time_s")
        rows_latency = [(self.node_of[ops.keys[own]], log_self[own], calls[own], labels)]
        if self.wire_edges.shape[0]:  # a client call's self time is evidence on its callee's network
            wire_calls = edges.sums[self.wire_edges, :, EdgeSum.CALLS]
            log_gap = log_window_mean(edges.sums[self.wire_edges, :, EdgeSum.GAP], wire_calls, LATENCY_FLOOR_S)
            callee = self.node_of[low(edges.keys[self.wire_edges])]
            label = Labels("network_time_s", self.wire_edges, self._edge_name)
            rows_latency.append((self.network_base + callee, log_gap, wire_calls, label))
        failed = ops.sums[:, :, OpSum.ERRORS]
        # a client call's error its callee's span reports is the callee's answer; one its callee
        # outlived is the client's deadline passing on the callee's time (read as its latency)
        answered = edges.sums[self.wire_edges, :, EdgeSum.ERRORS] + edges.sums[self.wire_edges, :, EdgeSum.GAVE_UP]
        erring = answered.any(axis=1)
        if erring.any():
            answers = sum_rows(self.edge_caller[self.wire_edges[erring]], answered[erring], failed.shape[0])
            failed = np.maximum(failed - answers, 0.0)
        error_rate = per_window_mean(failed, calls)
        rows_errors = [(self.node_of[ops.keys], error_rate, calls, self.op_label(ops.keys, "error_rate"))]
        # Virtual callees: the client spans' own durations and errors are their evidence.
        callee_node = self.node_of[low(edges.keys)]
        virtual = self.names.of_kind(NodeKind.VIRTUAL)[callee_node]
        if virtual.any():
            s = edges.sums[virtual]
            peer_calls = s[:, :, EdgeSum.PEER_CALLS]
            log_peer = log_window_mean(s[:, :, EdgeSum.PEER_DURATION], peer_calls, LATENCY_FLOOR_S)
            label = Labels("client_time_s", callee_node[virtual], self.names.nodes.__getitem__)
            rows_latency.append((callee_node[virtual], log_peer, peer_calls, label))
            peer_errors = per_window_mean(s[:, :, EdgeSum.PEER_ERRORS], peer_calls)
            rows_errors.append((callee_node[virtual], peer_errors, peer_calls, label))
        latency = self.rows([*rows_latency, *more_latency], direction=1, floor=0.05, log_values=True)
        # A shift must also be large to count: full weight from a doubling of the mean.
        ratio = np.log(np.maximum(latency.shift.observed, 1e-12) / np.maximum(latency.shift.baseline, 1e-12))
        latency.score = latency.score * np.clip(ratio / np.log(2.0), 0.0, 1.0)
        errors = self.rows(rows_errors, direction=1, floor=0.01)
        shifted = np.flatnonzero(errors.score > 0)  # the count test can only lower a score
        calls_per_window = np.concatenate([part[2] for part in rows_errors])[shifted]
        errors.score[shifted] = np.minimum(
            errors.score[shifted], binomial_score(errors.shift, shifted, calls_per_window)
        )
        return latency, errors

    def _unpaired_calls(self) -> tuple[Index, Array, Array]:
        """The edge rows with client calls no callee span paired (calls to uninstrumented
        callees), their sums, and how many such calls per window."""
        s = self.series.edges.sums
        rows = np.flatnonzero((s[:, :, EdgeSum.PEER_CALLS] > s[:, :, EdgeSum.PAIRED]).any(axis=1))
        sums = s[rows]
        return rows, sums, np.maximum(sums[:, :, EdgeSum.PEER_CALLS] - sums[:, :, EdgeSum.PAIRED], 0.0)

    def _unpaired_peer_time(self) -> Array:
        """Seconds each caller operation (ops row) spent in calls to uninstrumented callees, per window."""
        s, unpaired = self.unpaired_sums, self.unpaired
        share = np.divide(unpaired, s[:, :, EdgeSum.PEER_CALLS], out=np.zeros_like(unpaired), where=unpaired > 0)
        n = self.series.ops.keys.shape[0]
        return sum_rows(self.edge_caller[self.unpaired_edges], s[:, :, EdgeSum.PEER_DURATION] * share, n)

    def call_structure(self) -> Rows:
        ops, edges = self.series.ops, self.series.edges
        if edges.keys.shape[0] == 0:
            return self.rows([], direction=0, floor=0.0)
        s = edges.sums
        # Successful requests only: a request that fails part-way skips its later calls, and that
        # is the failure's evidence (errors), not a change of the code path.
        calls = s[:, :, EdgeSum.CALLS] - s[:, :, EdgeSum.FAILED_CALLER]
        if self.unpaired_edges.shape[0]:  # an uninstrumented callee's calls count where they succeeded
            peer = self.unpaired_sums
            peer_calls = peer[:, :, EdgeSum.PEER_CALLS]
            ok = np.divide(
                peer_calls - peer[:, :, EdgeSum.PEER_ERRORS],
                peer_calls,
                out=np.zeros_like(peer_calls),
                where=peer_calls > 0,
            )
            calls[self.unpaired_edges] += self.unpaired * ok
        caller_op = high(edges.keys)
        known = self.edge_caller_known
        caller_calls = np.zeros_like(calls)
        caller = self.edge_caller[known]
        caller_errors = ops.sums[caller, :, OpSum.ERRORS]
        caller_calls[known] = ops.sums[caller, :, OpSum.CALLS] - caller_errors
        per_call = per_window_mean(calls, caller_calls)
        mean = calls.sum(axis=1) / np.maximum(caller_calls.sum(axis=1), 1.0)  # counts: never NaN
        floor = np.maximum(mean, 0.02)[:, None]  # Poisson: variance of a count per call ~ its mean
        label = Labels("calls_per_request", low(edges.keys), self.op_name)
        rows = self.rows([(self.node_of[caller_op], per_call, caller_calls, label)], 0, floor)
        rows.score = np.abs(rows.score)
        # A handler that catches an exception, logs it and returns skips its later calls as a
        # failure does: with the requests that logged an error beyond their failed spans counted
        # out too, a call that moves no more is the error's evidence, not a changed code path.
        beyond = error_lines(self.series.log_ops, self.templates, caller_op[known]) - caller_errors
        logged = np.flatnonzero((beyond > 0).any(axis=1))  # only these rows can score otherwise
        if logged.shape[0]:
            hit = np.flatnonzero(known)[logged]
            uncaught = np.maximum(caller_calls[hit] - np.maximum(beyond[logged], 0), 0.0)
            again = Labels("calls_per_request", low(edges.keys[hit]), self.op_name)
            part = (self.node_of[caller_op[hit]], per_window_mean(calls[hit], uncaught), uncaught, again)
            rows.score[hit] = np.minimum(rows.score[hit], np.abs(self.rows([part], 0, floor[hit]).score))
        return rows

    def rows(
        self,
        parts: list[tuple[Index, Array, Array, Labels]],
        direction: int,
        floor: Array | float,
        log_values: bool = False,
    ) -> Rows:
        """Shifts of the rows in `parts`; with `log_values` the series are logs and the reported
        baseline and observed levels go back to natural units."""
        if not parts:
            empty = np.zeros(0)
            return Rows(np.zeros(0, np.int64), Shift(np.zeros(0, np.int64), empty, empty, empty), [], empty)
        node = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        w = np.concatenate([p[2] for p in parts])
        labels = [p[3] for p in parts]
        shift = self.shift(y, w, direction, floor)
        if log_values:
            shift = Shift(shift.onset, np.exp(shift.baseline), np.exp(shift.observed), shift.score)
        return Rows(node, shift, labels, shift.score.copy())
