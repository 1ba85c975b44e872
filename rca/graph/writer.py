"""The ingest queue: receivers hand decoded batches (spans, log records, data points) to one writer thread
that owns the graph.

`submit` waits until its batch is in the graph before returning, so an acknowledged export
is visible to every later read (read-your-writes). The queue is bounded: when full, `submit`
raises `Overloaded` at once and the receiver tells the client to retry. The writer takes every
batch waiting (up to `COALESCE_SPANS` rows) into one graph update, spans before log records so that
records join the spans sent beside them, then data points and call statistics: the graph's cost per
update is largely fixed, so bigger updates keep up with more concurrent exporters.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TypeVar

import numpy as np

from rca.graph.call_stats import CallStats
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.logs import LogBatch, concat_logs
from rca.telemetry.metrics import MetricBatch, concat_metrics
from rca.telemetry.spans import SpanBatch

T = TypeVar("T")
Batch = SpanBatch | LogBatch | MetricBatch | CallStats
RETRY_AFTER_SECONDS = 1
COALESCE_SPANS = 65_536
_INDEX_COLUMNS = ("service", "operation", "peer", "resource", "instance")


def concat(batches: Sequence[SpanBatch]) -> SpanBatch:
    """One batch holding the rows of all `batches`, their string tables laid end to end."""
    if len(batches) == 1:
        return batches[0]
    offsets = np.cumsum([0, *(len(b.strings) for b in batches[:-1])])
    columns = {}
    for f in fields(SpanBatch):
        if f.name == "strings":
            continue
        parts = [getattr(b, f.name) for b in batches]
        if f.name in _INDEX_COLUMNS:
            parts = [np.where(p >= 0, p + np.int32(o), p) for p, o in zip(parts, offsets.tolist(), strict=True)]
        columns[f.name] = np.concatenate(parts)
    strings = tuple(s for b in batches for s in b.strings)
    return SpanBatch(strings=strings, **columns)


class Overloaded(RuntimeError):
    """The ingest queue is full; retry after `retry_after` seconds."""

    def __init__(self, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(f"ingest queue is full, retry in {retry_after}s")
        self.retry_after = retry_after


@dataclass(slots=True)
class _Job:
    batch: Batch
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class GraphWriter:
    """Serialises writes to a `ServiceGraph` and lends it to readers under the same lock."""

    def __init__(self, graph: ServiceGraph, *, queue_size: int = 64) -> None:
        self.graph = graph
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._places = threading.BoundedSemaphore(queue_size)
        self._thread = threading.Thread(target=self._run, name="rca-ingest", daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    @contextmanager
    def admit(self) -> Iterator[None]:
        """Holds one of `queue_size` places for a request from its decode to its ack; raises
        `Overloaded` when none is free, so overload reaches clients instead of piling up."""
        if not self._places.acquire(blocking=False):
            raise Overloaded()
        try:
            yield
        finally:
            self._places.release()

    def submit(self, batch: Batch, timeout: float = 30.0) -> None:
        """Adds `batch` to the graph, returning once it is visible; raises `Overloaded`."""
        if len(batch) == 0:
            return
        job = _Job(batch)
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise Overloaded() from None
        if not job.done.wait(timeout):
            raise Overloaded()
        if job.error is not None:
            raise job.error

    def read(self, reader: Callable[[ServiceGraph], T]) -> T:
        """Runs `reader` on the graph with writes held off."""
        with self._lock:
            return reader(self.graph)

    def _run(self) -> None:
        while True:
            jobs = [self._queue.get()]
            rows = 0 if jobs[0] is None else len(jobs[0].batch)
            while jobs[-1] is not None and rows < COALESCE_SPANS:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                jobs.append(job)
                rows += 0 if job is None else len(job.batch)
            work = [job for job in jobs if job is not None]
            if work:
                error: BaseException | None = None
                span_batches = [job.batch for job in work if isinstance(job.batch, SpanBatch)]
                logs = [job.batch for job in work if isinstance(job.batch, LogBatch)]
                points = [job.batch for job in work if isinstance(job.batch, MetricBatch)]
                calls = [job.batch for job in work if isinstance(job.batch, CallStats)]
                try:
                    with self._lock:
                        if span_batches:
                            self.graph.add(concat(span_batches))
                        if logs:
                            self.graph.add_logs(concat_logs(logs))
                        if points:
                            self.graph.add_metrics(concat_metrics(points))
                        for stats in calls:
                            self.graph.add_call_stats(stats)
                except Exception as exc:  # a bug in the graph must not kill ingest
                    error = exc
                for job in work:
                    job.error = error
                    job.done.set()
            if jobs[-1] is None:
                return

    def close(self) -> None:
        """Finishes queued batches, then stops the writer."""
        self._queue.put(None)
        self._thread.join()
