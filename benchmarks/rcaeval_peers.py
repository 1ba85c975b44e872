"""Published RCA methods from the RCAEval package (`pip install 'rca[bench]'`), fed what they expect.

- `baro`, `nsigma` (metric-based): a frame of per-node series per graph window, `time` (s) and
  `{node}_latency` (mean seconds per call) and `{node}_error` (error share) columns, from the same
  local graph the other peers read; a column's rank is its node's.
- `microrank`, `tracerca` (trace-based): a span frame (`traceID`, `spanID`, `parentSpanID`,
  `serviceName`, `methodName`, `operationName`, `startTime` and `duration` in µs) of the replayed
  spans; an operation's rank is its service's. Operations with no span before the onset are
  dropped: the published code looks up their baseline and would fail. MicroRank's PageRank is
  quadratic in traces and TraceRCA loops over operations in pandas, so each sees a seeded sample
  of whole traces per side of the onset (`MICRORANK_TRACES`, `TRACERCA_TRACES`).
Like the `threshold` and `pagerank` peers, none is told the injection time: the onset they are
given is the middle of the window (the lookback's first half is the baseline).

RCAEval's `e2e` package imports causal-learn methods on import under Python 3.11; its method
modules are loaded without running that `__init__` (`nsigma`, which lives there, is compiled from
its source alone), so the extra stays light: rcaeval, pandas, requests.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.util
import io
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rca.graph.accumulators import OpSum
from rca.graph.series import window_series
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.spans import SpanBatch

if TYPE_CHECKING:
    import pandas as pd

EXTRA_HINT = "pip install 'rca[bench]' (or pip install --no-deps rcaeval==1.8.1 pandas requests)"
MICRORANK_TRACES = 300
TRACERCA_TRACES = 1000
SEED = 0
_FRAME_DATASET = "rca-bench"  # any name but None: RCAEval then drops the `time` and constant columns


class MissingExtraError(ValueError):
    """A method needs the optional `bench` extra, which is not installed."""


def prepare(methods: Sequence[str]) -> None:
    """Imports the RCAEval methods among `methods` (so no case pays for the import); raises
    MissingExtraError naming the extra when it is absent."""
    wanted = [m for m in methods if m in GRAPH_PEERS or m in SPAN_PEERS]
    if not wanted:
        return
    absent = [name for name in ("RCAEval", "pandas", "requests") if importlib.util.find_spec(name) is None]
    if absent:
        raise MissingExtraError(
            f"method(s) {', '.join(wanted)} need the optional 'bench' extra ({', '.join(absent)} missing): {EXTRA_HINT}"
        )
    for module in ("baro", "microrank", "tracerca"):
        _e2e(module)


def _e2e(module: str) -> types.ModuleType:
    """`RCAEval.e2e.{module}`, imported without the package's `__init__`."""
    if "RCAEval.e2e" not in sys.modules:
        spec = importlib.util.find_spec("RCAEval")
        if spec is None or spec.origin is None:
            raise MissingExtraError(f"RCAEval is not installed: {EXTRA_HINT}")
        package = types.ModuleType("RCAEval.e2e")
        package.__path__ = [str(Path(spec.origin).parent / "e2e")]
        sys.modules["RCAEval.e2e"] = package
    return importlib.import_module(f"RCAEval.e2e.{module}")


@functools.cache
def _nsigma() -> Callable[..., dict[str, Any]]:
    """RCAEval's `nsigma`, compiled from `RCAEval/e2e/__init__.py` with the imports it needs."""
    _e2e("baro")  # the package module exists from here on
    e2e = sys.modules["RCAEval.e2e"]
    if hasattr(e2e, "nsigma"):
        return e2e.nsigma  # type: ignore[no-any-return]
    source_path = Path(e2e.__path__[0]) / "__init__.py"
    tree = ast.parse(source_path.read_text())
    keep: list[ast.stmt] = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom | ast.Import)
        or (isinstance(node, ast.FunctionDef) and node.name == "nsigma")
    ]
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(source_path), "exec"), namespace)
    return namespace["nsigma"]  # type: ignore[no-any-return]


def _quiet(function: Callable[..., dict[str, Any]], *args: Any, **named: Any) -> list[str]:
    """The method's ranks, its prints and progress bars swallowed."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return [str(r) for r in function(*args, **named)["ranks"]]


# -- metric-based: per-node series of the graph's windows -------------------------------------


def metric_frame(graph: ServiceGraph, start_ns: int, end_ns: int) -> tuple[pd.DataFrame, dict[str, str]]:
    """`time`, `{node}_latency`, `{node}_error` per graph window of [start_ns, end_ns); and each
    column's node."""
    import pandas as pd

    series = window_series(graph, start_ns, start_ns, end_ns)
    names = graph.names
    nodes = names.nodeop_node[series.ops.keys]
    unique, row = np.unique(nodes, return_inverse=True)
    sums = np.zeros((unique.shape[0], series.windows, len(OpSum)))
    np.add.at(sums, row, series.ops.sums)
    calls = sums[:, :, OpSum.CALLS]
    with np.errstate(invalid="ignore", divide="ignore"):
        latency = np.where(calls > 0, sums[:, :, OpSum.DURATION] / calls, np.nan)
        errors = np.where(calls > 0, sums[:, :, OpSum.ERRORS] / calls, 0.0)
    columns: dict[str, Any] = {"time": (series.start_ns(np.arange(series.windows)) / 1e9).tolist()}
    owner: dict[str, str] = {}
    for i, node in enumerate(unique.tolist()):
        name = names.nodes[node]
        columns[f"{name}_latency"], columns[f"{name}_error"] = latency[i], errors[i]
        owner[f"{name}_latency"] = owner[f"{name}_error"] = name
    frame = pd.DataFrame(columns).ffill().fillna(0.0)  # a window without calls keeps the last latency
    return frame, owner


def _metric_peer(method: Callable[[], Callable[..., dict[str, Any]]]) -> Callable[..., list[str]]:
    def rank(graph: ServiceGraph, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> list[str]:
        frame, owner = metric_frame(graph, start_ns, end_ns)
        if len(owner) == 0:
            return []
        onset_s = (start_ns + end_ns) / 2 / 1e9
        ranked = _quiet(method(), frame, inject_time=onset_s, dataset=_FRAME_DATASET)
        return list(dict.fromkeys(owner[c] for c in ranked if c in owner))

    return rank


baro_ranking = _metric_peer(lambda: _e2e("baro").baro)
nsigma_ranking = _metric_peer(_nsigma)


# -- trace-based: the replayed spans as a frame ------------------------------------------------


def span_frame(batches: Sequence[SpanBatch], start_ns: int, end_ns: int) -> pd.DataFrame:
    """The spans starting in [start_ns, end_ns) in RCAEval's trace columns (times in µs)."""
    import pandas as pd

    parts = []
    for batch in batches:
        sel = (batch.start_ns >= start_ns) & (batch.start_ns < end_ns)
        if not sel.any():
            continue
        strings = np.asarray(batch.strings, dtype=object)
        operation = strings[batch.operation[sel]]
        parts.append(
            pd.DataFrame(
                {
                    "traceID": batch.trace_id[sel, 1].astype(np.int64),
                    "spanID": batch.span_id[sel].astype(np.int64),
                    "parentSpanID": batch.parent_id[sel].astype(np.int64),
                    "serviceName": strings[batch.service[sel]],
                    "methodName": operation,
                    "operationName": operation,
                    "startTime": batch.start_ns[sel] // 1000,
                    "duration": batch.duration_ns[sel] // 1000,
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=["traceID", "spanID", "parentSpanID", "serviceName", "methodName", "startTime"])
    return pd.concat(parts, ignore_index=True)


def _with_baseline(frame: pd.DataFrame, onset_us: float) -> pd.DataFrame:
    """The spans of operations that also ran before the onset."""
    key = frame["serviceName"] + "\x00" + frame["methodName"]
    before = set(key[frame["startTime"] + frame["duration"] < onset_us])
    return frame[key.isin(before)].reset_index(drop=True)


def _sample_traces(frame: pd.DataFrame, onset_us: float, per_side: int) -> pd.DataFrame:
    """At most `per_side` whole traces ending before the onset and as many after (seeded)."""
    rng = np.random.default_rng(SEED)
    ends = (frame["startTime"] + frame["duration"]).groupby(frame["traceID"]).max()
    keep = []
    for side in (ends[ends < onset_us].index.to_numpy(), ends[ends >= onset_us].index.to_numpy()):
        keep.append(rng.choice(side, size=min(per_side, side.shape[0]), replace=False))
    return frame[frame["traceID"].isin(np.concatenate(keep))].reset_index(drop=True)


def _trace_peer(module: str, per_side: int | None) -> Callable[..., list[str]]:
    def rank(batches: Sequence[SpanBatch], alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> list[str]:
        onset_us = (start_ns + end_ns) / 2 / 1000
        frame = span_frame(batches, start_ns, end_ns)
        if per_side is not None:
            frame = _sample_traces(frame, onset_us, per_side)
        frame = _with_baseline(frame, onset_us)
        if frame.empty:
            return []
        owner = dict(zip(frame["serviceName"] + "_" + frame["methodName"], frame["serviceName"], strict=True))
        ranked = _quiet(getattr(_e2e(module), module), frame, inject_time=onset_us)
        return list(dict.fromkeys(owner[op] for op in ranked if op in owner))

    return rank


microrank_ranking = _trace_peer("microrank", MICRORANK_TRACES)
tracerca_ranking = _trace_peer("tracerca", TRACERCA_TRACES)

GRAPH_PEERS: dict[str, Callable[[ServiceGraph, Sequence[str], int, int], list[str]]] = {
    "baro": baro_ranking,
    "nsigma": nsigma_ranking,
}
SPAN_PEERS: dict[str, Callable[[Sequence[SpanBatch], Sequence[str], int, int], list[str]]] = {
    "microrank": microrank_ranking,
    "tracerca": tracerca_ranking,
}
