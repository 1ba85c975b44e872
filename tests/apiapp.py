"""The API app in process over a fresh graph and a real SQLite store, for tests that need no server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi import FastAPI

from api.app import DEFAULT_MAX_BODY_BYTES, create_app
from models.ranker import BayesianRanker
from rca.graph import ServiceGraph
from rca.incident_service import IncidentService
from rca.ingestion import Ingestor
from rca.store import IncidentStore


@contextmanager
def api_app(
    db: Path,
    *,
    api_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    clock: Callable[[], int] = time.time_ns,
) -> Iterator[tuple[FastAPI, Ingestor]]:
    """The app and its ingestor (to feed spans); both closed afterwards."""
    ingestor = Ingestor(ServiceGraph())
    store = IncidentStore.open(f"sqlite:///{db}")
    service = IncidentService(store=store, ranker=BayesianRanker(), graphs=ingestor, clock=clock)
    try:
        yield create_app(ingestor, service, api_token=api_token, max_body_bytes=max_body_bytes), ingestor
    finally:
        ingestor.close()
        store.close()
