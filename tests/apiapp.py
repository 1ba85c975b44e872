"""The API app in process over a fresh graph and a real SQLite store, for tests that need no server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi import FastAPI

from api.app import DEFAULT_MAX_BODY_BYTES, create_app
from models.ranker import BayesianRanker
from rca.graph.service_graph import ServiceGraph
from rca.graph.writer import GraphWriter
from rca.incidents.service import IncidentService
from storage.sql import SqlIncidentStore


@contextmanager
def api_app(
    db: Path,
    *,
    api_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    clock: Callable[[], int] = time.time_ns,
) -> Iterator[tuple[FastAPI, GraphWriter]]:
    """The app and its writer (to feed spans); both closed afterwards."""
    writer = GraphWriter(ServiceGraph())
    store = SqlIncidentStore.open(f"sqlite:///{db}")
    service = IncidentService(store=store, ranker=BayesianRanker(), graphs=writer, clock=clock)
    try:
        yield create_app(writer, service, api_token=api_token, max_body_bytes=max_body_bytes), writer
    finally:
        writer.close()
        store.close()
