"""The ingest queue: receivers hand decoded batches to one writer thread that owns the graph.

`submit` waits until its batch is in the graph before returning, so an acknowledged export
is visible to every later read (read-your-writes). The queue is bounded: when full, `submit`
raises `Overloaded` at once and the receiver tells the client to retry.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from rca.graph import ServiceGraph
from rca.spans import SpanBatch

T = TypeVar("T")
RETRY_AFTER_SECONDS = 1


class Overloaded(RuntimeError):
    """The ingest queue is full; retry after `retry_after` seconds."""

    def __init__(self, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(f"ingest queue is full, retry in {retry_after}s")
        self.retry_after = retry_after


@dataclass(slots=True)
class _Job:
    batch: SpanBatch
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class Ingestor:
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

    def submit(self, batch: SpanBatch, timeout: float = 30.0) -> None:
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
            job = self._queue.get()
            if job is None:
                return
            try:
                with self._lock:
                    self.graph.add(job.batch)
            except Exception as exc:  # a bug in the graph must not kill ingest
                job.error = exc
            job.done.set()

    def close(self) -> None:
        """Finishes queued batches, then stops the writer."""
        self._queue.put(None)
        self._thread.join()
